// svc's mgmt.sock client against the real server: answers matched by id, svcd's errors as the
// same SvcError, notifications, and a daemon that goes away mid-call.
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MgmtServer } from '../daemon/mgmt/server.js';
import { silentLogger } from '../lib/log.js';
import { SvcError } from '../protocol/errors.js';
import { Type } from '../protocol/type.js';
import { MgmtClient, mgmtCall } from './mgmt-client.js';

describe('MgmtClient', () => {
  let dir: string;
  let sock: string;
  let server: MgmtServer;
  const hanging: (() => void)[] = [];
  beforeAll(async () => {
    dir = mkdtempSync(join(os.tmpdir(), 'svc-mgmt-client-'));
    sock = join(dir, 'mgmt.sock');
    server = new MgmtServer(silentLogger());
    server.register('echo', async (p) => p);
    server.register('slow', async (p) => {
      // Answers after the next call does: replies come out of order.
      await new Promise<void>((r) => hanging.push(r));
      return p;
    });
    server.register('release', async () => {
      for (const r of hanging.splice(0)) r();
      return 'released';
    });
    server.register('refuse', async () => {
      throw new SvcError('not_found', 'no agent a1 here', {
        errors: [{ field: 'agent', message: 'unknown' }],
      });
    });
    server.register('typed', async (p) => p, Type.Object({ n: Type.Integer() }));
    server.register('stream', async (_p, call) => {
      call.notify('tick', { n: 1 });
      call.notify('tick', { n: 2 });
      return 'streamed';
    });
    server.register('hang', () => new Promise(() => {}));
    await server.listen(sock);
  });
  afterAll(async () => {
    for (const r of hanging.splice(0)) r();
    await server.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('matches concurrent answers to their calls by id', async () => {
    const c = await MgmtClient.connect(sock);
    try {
      const slow = c.call('slow', { which: 'slow' });
      const echo = await c.call('echo', { which: 'echo' });
      expect(await c.call('release')).toBe('released');
      expect([echo, await slow]).toEqual([{ which: 'echo' }, { which: 'slow' }]);
    } finally {
      c.close();
    }
  });

  it('turns an error answer into the SvcError svcd threw, code and field errors included', async () => {
    const e = await mgmtCall(sock, 'refuse').catch((x: unknown) => x);
    expect(e).toBeInstanceOf(SvcError);
    expect(e).toMatchObject({
      code: 'not_found',
      message: 'no agent a1 here',
      errors: [{ field: 'agent', message: 'unknown' }],
    });
    await expect(mgmtCall(sock, 'typed', { n: 'x' })).rejects.toMatchObject({
      code: 'validation_failed',
      message: 'params/n: must be integer',
    });
    await expect(mgmtCall(sock, 'nope')).rejects.toMatchObject({ code: 'not_found' });
  });

  it('hands notifications to onNotification, in order, before the answer', async () => {
    const c = await MgmtClient.connect(sock);
    const got: unknown[] = [];
    c.onNotification = (method, params) => got.push([method, params]);
    try {
      expect(await c.call('stream')).toBe('streamed');
      expect(got).toEqual([
        ['tick', { n: 1 }],
        ['tick', { n: 2 }],
      ]);
    } finally {
      c.close();
    }
  });

  it('fails a pending call, and later ones, as unavailable when the connection closes', async () => {
    const c = await MgmtClient.connect(sock);
    const pending = c.call('hang');
    c.close();
    await expect(pending).rejects.toMatchObject({ code: 'unavailable' });
    await expect(c.call('echo')).rejects.toMatchObject({
      code: 'unavailable',
      message: 'svcd closed the mgmt.sock connection',
    });
  });

  it('says how to start svcd when nothing listens on the socket', async () => {
    await expect(MgmtClient.connect(join(dir, 'none.sock'))).rejects.toMatchObject({
      code: 'unavailable',
      message: expect.stringContaining('start it with "svc daemon up"'),
    });
  });
});
