// The fan-out component in-process, on its default unix socket, with no tower to follow
// (a port nothing listens on): what a consumer and fanout.status see.
import { statSync } from 'node:fs';
import http from 'node:http';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { makeTestDaemonContext, type TestDaemonContext } from '../../../test/support/daemon-ctx.js';
import { waitFor } from '../../../test/support/poll.js';
import type { FeedEvent } from '../../protocol/events.js';
import type { Component } from '../component.js';
import { parseTomlText } from '../config/toml.js';
import { parseSvcdConfig } from '../svcd-config.js';
import { createFanout, LocalSequence, upstreamUrl } from './fanout.js';
import { fanoutMethods } from './methods.js';

function event(id: string): FeedEvent {
  return {
    id,
    ts: '2025-01-01T00:00:00.000Z',
    type: 'inbox',
    domain_id: 'd1',
    mission_id: null,
    agent_id: 'a1',
    status: null,
    payload: { text: 'hi' },
  };
}

describe('LocalSequence', () => {
  it("numbers svcd's own events after the last tower event and refuses ids that do not move forward", () => {
    const seq = new LocalSequence(() => 0);
    expect(seq.local('matrix-down', { event: 'matrix-down' }).id).toBe('0.1');
    const e7 = seq.tower(event('7'), undefined);
    expect(e7?.id).toBe('7');
    expect(e7?.value.sse).toBe(`id: 7\ndata: ${JSON.stringify(event('7'))}\n\n`);
    expect(seq.tower(event('7'), e7?.key)).toBeNull();
    const down = seq.local('matrix-down', { event: 'matrix-down' });
    expect(down.id).toBe('7.1');
    expect(down.value.sse).toMatch(/^id: 7\.1\nevent: matrix-down\ndata: \{"id":"7\.1",/);
    expect(down.value.meta).toBeNull();
    const msg = seq.local('message', { source: 'mqtt' });
    expect(msg.id).toBe('7.2');
    expect(msg.value.sse).toMatch(/^id: 7\.2\ndata: /);
    expect(msg.value.meta).toEqual({ type: 'matrix', domain_id: null, mission_id: null });
    const reset = seq.local('reset', { reason: 'upstream_retention', last_event_id: '3', resume_after: '5' });
    expect(JSON.parse(reset.value.json)).toEqual({
      type: 'reset',
      id: '7.3',
      reason: 'upstream_retention',
      last_event_id: '3',
      resume_after: '5',
    });
    expect(seq.tower(event('9'), reset.key)?.id).toBe('9');
    expect(seq.local('matrix-up', {}).id).toBe('9.1');
  });

  it('puts the upstream filters on the feed URL', () => {
    expect(
      upstreamUrl('https://t.example/', { types: ['approval', 'inbox'], domains: ['d1'], missions: [] }),
    ).toBe('https://t.example/events/stream?type=approval&type=inbox&domain_id=d1');
    expect(upstreamUrl('http://t', { types: [], domains: [], missions: [] })).toBe('http://t/events/stream');
  });
});

describe('the fan-out component', () => {
  let t: TestDaemonContext | null = null;
  let fanout: Component | null = null;
  afterEach(async () => {
    await fanout?.stop();
    await t?.close();
    fanout = null;
    t = null;
  });

  it('reports disabled and opens nothing when [fanout] is off', async () => {
    t = await makeTestDaemonContext();
    const f = createFanout(t.ctx, { config: parseSvcdConfig(parseTomlText('c.toml', '')).fanout });
    t.register(fanoutMethods(f));
    fanout = f;
    await fanout.start();
    expect(await t.call('fanout.status')).toEqual({ enabled: false });
    expect(fanout.status?.()).toEqual({ enabled: false });
  });

  it('serves /events on a 0600 unix socket and tells consumers the tower is down, with the error', async () => {
    t = await makeTestDaemonContext();
    const closed = await new Promise<number>((resolve) => {
      const srv = createServer().listen(0, '127.0.0.1', () => {
        const { port } = srv.address() as { port: number };
        srv.close(() => resolve(port));
      });
    });
    const tower = `http://127.0.0.1:${closed}`;
    t.ctx.tower = { baseUrl: tower, request: () => Promise.reject(new Error('no tower')) };
    const config = parseSvcdConfig(parseTomlText('c.toml', '[fanout]\nenable = true')).fanout;
    const f = createFanout(t.ctx, { config, random: () => 0 });
    t.register(fanoutMethods(f));
    fanout = f;
    await fanout.start();
    const sock = join(t.ctx.paths.svcdDir, 'events.sock');
    expect(statSync(sock).mode & 0o777).toBe(0o600);
    let body = '';
    const req = http.get(
      { socketPath: sock, path: '/events', headers: { 'last-event-id': '0.0' } },
      (res) => {
        res.setEncoding('utf8');
        res.on('data', (d: string) => {
          body += d;
        });
      },
    );
    req.on('error', () => {});
    // The consumer may connect after the first failure: the resume from "0.0" replays it.
    await waitFor('matrix-down', () => body.includes('event: matrix-down'));
    const data = JSON.parse(/event: matrix-down\ndata: (.*)\n/.exec(body)?.[1] ?? '{}') as FeedEvent;
    expect(data).toMatchObject({
      id: '0.1',
      type: 'matrix',
      payload: { event: 'matrix-down', upstream: tower, status: null, error: 'ECONNREFUSED' },
    });
    const s = await t.call<Record<string, unknown>>('fanout.status');
    expect(s).toMatchObject({
      enabled: true,
      listen: sock,
      auth: 'unix-socket-0600',
      consumers: 1,
      upstream: {
        state: 'down',
        url: `${tower}/events/stream`,
        last_event_id: null,
        last_status: null,
        last_error: 'ECONNREFUSED',
      },
      reconnects: [],
      throttled: false,
      throttles: [],
      rate_limit: { holding: false, held: 0 },
      mqtt: null,
    });
    req.destroy();
  });
});
