// Fuzzing mgmt.sock (fast-check): random bytes, truncated JSON, wrong types and lines over the
// limit, each followed on the same connection by a well-formed request that must still be
// answered correctly; other clients are served meanwhile; the server never crashes.
import { createConnection, type Socket } from 'node:net';
import { join } from 'node:path';
import { Type } from '@sinclair/typebox';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeTempDir } from '../../../test/support/tmp.js';
import { silentLogger } from '../../lib/log.js';
import { MGMT_MAX_IN_FLIGHT, MGMT_MAX_LINE_BYTES, MGMT_MAX_UNREAD_BYTES } from '../../protocol/mgmt.js';
import { MgmtServer } from './server.js';

interface Reply {
  id: unknown;
  result?: unknown;
  error?: { code: number; message: string };
}

class Client {
  private buf = '';
  private waiters = new Map<number, (r: Reply) => void>();
  closed = false;
  private constructor(private readonly s: Socket) {
    s.setEncoding('utf8');
    s.on('data', (d: string) => {
      this.buf += d;
      for (let nl = this.buf.indexOf('\n'); nl >= 0; nl = this.buf.indexOf('\n')) {
        const line = this.buf.slice(0, nl);
        this.buf = this.buf.slice(nl + 1);
        const r = JSON.parse(line) as Reply;
        if (typeof r.id === 'number') this.waiters.get(r.id)?.(r);
      }
    });
    s.on('close', () => {
      this.closed = true;
    });
    s.on('error', () => {});
  }
  static open(path: string): Promise<Client> {
    return new Promise((res, rej) => {
      const s = createConnection(path);
      s.once('connect', () => res(new Client(s)));
      s.once('error', rej);
    });
  }
  /** Stops reading replies (they pile up in the server) until resume(). */
  pause() {
    this.s.pause();
  }
  resume() {
    this.s.resume();
  }
  raw(data: string | Uint8Array) {
    this.s.write(data);
  }
  call(id: number, method: string, params?: unknown): Promise<Reply> {
    return new Promise((res) => {
      this.waiters.set(id, res);
      this.s.write(`${JSON.stringify({ jsonrpc: '2.0', id, method, params })}\n`);
    });
  }
  close() {
    this.s.destroy();
  }
}

const BIG_REPLY = 'y'.repeat(64 * 1024);

async function until(what: string, cond: () => boolean): Promise<void> {
  const deadline = Date.now() + 20_000;
  while (!cond()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 5));
  }
}

describe('mgmt.sock under fuzzing', () => {
  const tmp = makeTempDir('svc-mgmt-fuzz-');
  const sock = join(tmp.dir, 'mgmt.sock');
  const server = new MgmtServer(silentLogger());
  let nextId = 1_000_000;

  beforeAll(async () => {
    server.register(
      'echo',
      async (p) => p,
      Type.Object({ n: Type.Integer() }, { additionalProperties: false }),
    );
    server.register('big', async () => BIG_REPLY);
    // A stream that stays open until its client leaves, like events.subscribe.
    server.register(
      'hold',
      (_p, call) =>
        new Promise((resolve) => {
          call.streaming();
          call.signal.addEventListener('abort', () => resolve(null), { once: true });
        }),
    );
    await server.listen(sock);
  });
  afterAll(async () => {
    await server.close();
    tmp.remove();
  });

  const junk = fc.oneof(
    fc.uint8Array({ maxLength: 2000 }),
    fc.string({ maxLength: 500 }),
    fc.json().map((j) => j.slice(0, Math.max(0, j.length - 1))),
    fc
      .record({
        jsonrpc: fc.oneof(fc.constant('2.0'), fc.anything()),
        id: fc.oneof(fc.string(), fc.double(), fc.constant(null), fc.anything()),
        method: fc.oneof(fc.constant('echo'), fc.constant('daemon.status'), fc.string(), fc.anything()),
        params: fc.anything(),
      })
      .map((o) => JSON.stringify(o)),
  );

  it('answers a well-formed request after any junk on the same connection', async () => {
    const c = await Client.open(sock);
    const other = await Client.open(sock);
    await fc.assert(
      fc.asyncProperty(junk, fc.integer(), async (j, n) => {
        c.raw(typeof j === 'string' ? j : Buffer.from(j));
        c.raw('\n');
        const id = nextId++;
        const [r, o] = await Promise.all([c.call(id, 'echo', { n }), other.call(id, 'echo', { n: 1 })]);
        expect(r).toMatchObject({ id, result: { n } });
        expect(o).toMatchObject({ id, result: { n: 1 } });
        expect(c.closed).toBe(false);
      }),
      { numRuns: 150 },
    );
    c.close();
    other.close();
  });

  it('rejects wrong param types with a JSON-RPC error and keeps the connection', async () => {
    const c = await Client.open(sock);
    for (const params of [{ n: 'x' }, { n: 1.5 }, { m: 1 }, [1], 'str', 42]) {
      const r = await c.call(nextId++, 'echo', params);
      expect(r.error?.code).toBeTypeOf('number');
    }
    const unknown = await c.call(nextId++, 'no.such.method');
    expect(unknown.error?.code).toBe(-32601);
    expect(await c.call(nextId++, 'echo', { n: 7 })).toMatchObject({ result: { n: 7 } });
    c.close();
  });

  it('discards lines over the limit without buffering them, then answers again', async () => {
    const c = await Client.open(sock);
    const chunk = 'x'.repeat(256 * 1024);
    for (let i = 0; i < (MGMT_MAX_LINE_BYTES / chunk.length) * 4; i++) c.raw(chunk);
    c.raw('\n');
    const before = process.memoryUsage().rss;
    for (let i = 0; i < 16; i++) c.raw(chunk);
    c.raw('\n');
    expect(await c.call(nextId++, 'echo', { n: 3 })).toMatchObject({ result: { n: 3 } });
    // 4 MiB more was sent; the server held at most one line's limit of it.
    expect(process.memoryUsage().rss - before).toBeLessThan(64 * 1024 * 1024);
    expect(c.closed).toBe(false);
    c.close();
  });

  it('stops reading the requests of a client that does not read its replies, and loses none', async () => {
    const c = await Client.open(sock);
    c.pause();
    const n = 2000; // 125 MiB of replies if the server kept reading
    const first = nextId;
    nextId += n;
    const replies = Array.from({ length: n }, (_, i) => c.call(first + i, 'big'));
    // The server holds lines back once a limit's worth of replies sits unread.
    await until('the server to hold requests back', () => server.backlog().queued > 0);
    const held = server.backlog();
    const bound = MGMT_MAX_UNREAD_BYTES + MGMT_MAX_IN_FLIGHT * (BIG_REPLY.length + 100);
    expect(held.unread).toBeLessThanOrEqual(bound);
    c.resume();
    const all = await Promise.all(replies);
    expect(all.every((r, i) => r.id === first + i && r.result === BIG_REPLY)).toBe(true);
    expect(server.backlog().peakUnread).toBeLessThanOrEqual(bound);
    // And the connection serves as before.
    expect(await c.call(nextId++, 'echo', { n: 5 })).toMatchObject({ result: { n: 5 } });
    c.close();
  });

  it('does not count open streams against the requests a connection may run at once', async () => {
    const c = await Client.open(sock);
    for (let i = 0; i < MGMT_MAX_IN_FLIGHT * 2; i++) void c.call(nextId++, 'hold');
    expect(await c.call(nextId++, 'echo', { n: 9 })).toMatchObject({ result: { n: 9 } });
    c.close();
  });
});
