// events.subscribe over a real mgmt.sock, fed by a real listener and ring (no tower): what a
// client gets, how it resumes, how a stream ends.
import { createConnection, type Socket } from 'node:net';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { waitFor } from '../../../test/support/poll.js';
import { makeTempDir } from '../../../test/support/tmp.js';
import { MgmtClient } from '../../cli/mgmt-client.js';
import { systemClock } from '../../lib/clock.js';
import { silentLogger } from '../../lib/log.js';
import { SvcError } from '../../protocol/errors.js';
import type { EventType, FeedEvent } from '../../protocol/events.js';
import type { EventsNotification, EventsSubscribeResult } from '../../protocol/local-feed.js';
import { registerMethods } from '../mgmt/method.js';
import { MgmtServer } from '../mgmt/server.js';
import { LocalSequence } from './fanout.js';
import { FanoutListener, type LocalEvent } from './listener.js';
import { EventRing } from './ring.js';
import { eventMethods } from './subscribe.js';

function feedEvent(id: number, type: EventType, domain: string | null): FeedEvent {
  return {
    id: String(id),
    ts: '2025-01-01T00:00:00.000Z',
    type,
    domain_id: domain,
    mission_id: null,
    agent_id: null,
    status: null,
    payload: { text: `event ${id}` },
  };
}

const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

/** mgmt.sock with events.* over a listener and ring that the test feeds by hand. */
async function setup(opts: { backlogLimit?: number; ring?: number; off?: boolean } = {}) {
  const tmp = makeTempDir('svcd-events-');
  const sock = join(tmp.dir, 'mgmt.sock');
  const ring = new EventRing<LocalEvent>(opts.ring ?? 100);
  const listener = new FanoutListener({
    ring,
    listen: { kind: 'unix', path: join(tmp.dir, 'events.sock') },
    token: null,
    clock: systemClock,
    log: silentLogger(),
  });
  const server = new MgmtServer(silentLogger());
  registerMethods(
    server,
    eventMethods({
      listener: () => {
        if (opts.off) throw new SvcError('unavailable', 'the local fan-out is off');
        return listener;
      },
      ...(opts.backlogLimit !== undefined ? { backlogLimit: opts.backlogLimit } : {}),
    }),
  );
  await server.listen(sock);
  cleanups.push(
    () => tmp.remove(),
    () => server.close(),
    () => listener.close(),
  );
  const seq = new LocalSequence(() => 0);
  let next = 1;
  /** Publishes tower events (as the upstream would), each in the ring and to every consumer. */
  const publish = (n: number, type: EventType = 'inbox', domain: string | null = 'd1') => {
    const ids: string[] = [];
    for (let i = 0; i < n; i++) {
      const e = seq.tower(feedEvent(next++, type, domain), ring.lastKey());
      if (!e) throw new Error('duplicate');
      ring.push(e);
      listener.broadcast(e);
      ids.push(e.id);
    }
    return ids;
  };
  const local = (name: string, payload: Record<string, unknown>) => {
    const e = seq.local(name, payload);
    ring.push(e);
    listener.broadcast(e);
    return e.id;
  };
  const client = async () => {
    const c = await MgmtClient.connect(sock);
    cleanups.push(() => c.close());
    const got: EventsNotification[] = [];
    c.onNotification = (method, params) => {
      if (method === 'events.event') got.push(params as EventsNotification);
    };
    return { c, got };
  };
  return { sock, listener, publish, local, client };
}

const ids = (got: EventsNotification[]) => got.map((n) => n.event.id);

describe('events.subscribe on mgmt.sock', () => {
  it('streams the live events its filter takes, each named by the subscribing request, and connection events to everyone', async () => {
    const s = await setup();
    s.publish(2); // before the subscription: not replayed without last_event_id
    const { c, got } = await s.client();
    const stream = c.call<EventsSubscribeResult>('events.subscribe', { type: ['approval'] });
    await waitFor('the subscription', () => s.listener.status().consumers === 1);
    const approvals = s.publish(2, 'approval');
    s.publish(1, 'inbox');
    const down = s.local('matrix-down', { event: 'matrix-down' });
    await waitFor('three notifications', () => got.length === 3);
    expect(ids(got)).toEqual([...approvals, down]);
    expect(got.map((n) => n.subscription)).toEqual([1, 1, 1]);
    expect(got[0]?.event).toEqual(feedEvent(3, 'approval', 'd1'));
    expect(got[2]?.event).toMatchObject({ type: 'matrix', payload: { event: 'matrix-down' } });
    expect(await c.call('events.unsubscribe', { subscription: 1 })).toEqual({ unsubscribed: 1 });
    expect(await stream).toEqual({ ended: 'unsubscribed', last_event_id: down, events: 3 });
    expect(s.listener.status().consumers).toBe(0);
  });

  it('replays what followed last_event_id from the buffer, then live events, with no gap and no repeat', async () => {
    const s = await setup();
    const before = s.publish(5, 'inbox', 'd1');
    s.publish(2, 'inbox', 'd2');
    const { c, got } = await s.client();
    const stream = c.call<EventsSubscribeResult>('events.subscribe', {
      domain_id: ['d1'],
      last_event_id: before[1],
    });
    await waitFor('the replay', () => got.length === 3);
    const live = s.publish(2, 'inbox', 'd1');
    await waitFor('the live events', () => got.length === 5);
    expect(ids(got)).toEqual([...before.slice(2), ...live]);
    await c.call('events.unsubscribe', { subscription: 1 });
    expect((await stream).last_event_id).toBe(live[1]);
  });

  it('sends a reset before the buffer when the resume id is not known there', async () => {
    const s = await setup({ ring: 3 });
    const all = s.publish(6);
    const { c, got } = await s.client();
    void c.call('events.subscribe', { last_event_id: '2' }).catch(() => {});
    await waitFor('reset and buffer', () => got.length === 4);
    expect(got[0]?.event).toEqual({ type: 'reset', reason: 'buffer', last_event_id: '2', resume_after: '3' });
    expect(ids(got.slice(1))).toEqual(all.slice(3));
  });

  it('keeps several streams on one connection apart and ends only the one unsubscribed', async () => {
    const s = await setup();
    const { c, got } = await s.client();
    const inbox = c.call<EventsSubscribeResult>('events.subscribe', { type: ['inbox'] });
    void c.call('events.subscribe', { type: ['approval'] }).catch(() => {});
    await waitFor('two subscriptions', () => s.listener.status().consumers === 2);
    const [i1] = s.publish(1, 'inbox');
    const [a1] = s.publish(1, 'approval');
    await waitFor('both events', () => got.length === 2);
    expect(got.map((n) => [n.subscription, n.event.id])).toEqual([
      [1, i1],
      [2, a1],
    ]);
    await c.call('events.unsubscribe', { subscription: 1 });
    expect(await inbox).toEqual({ ended: 'unsubscribed', last_event_id: i1, events: 1 });
    const [a2] = s.publish(1, 'approval');
    s.publish(1, 'inbox');
    await waitFor('the approval stream to go on', () => got.length === 3);
    expect(got[2]).toMatchObject({ subscription: 2, event: { id: a2 } });
    // Unsubscribing twice, or a stream of another connection, is not_found.
    await expect(c.call('events.unsubscribe', { subscription: 1 })).rejects.toMatchObject({
      code: 'not_found',
    });
    const other = await s.client();
    await expect(other.c.call('events.unsubscribe', { subscription: 2 })).rejects.toMatchObject({
      code: 'not_found',
    });
    expect(s.listener.status().consumers).toBe(1);
  });

  it('ends the stream of a client that leaves more than the backlog unread, and sends it nothing more', async () => {
    const limit = 64 * 1024;
    const s = await setup({ backlogLimit: limit, ring: 10_000 });
    const raw: Socket = createConnection(s.sock);
    cleanups.push(() => {
      raw.destroy();
    });
    await new Promise((resolve) => raw.once('connect', resolve));
    raw.write(`${JSON.stringify({ jsonrpc: '2.0', id: 'slow', method: 'events.subscribe' })}\n`);
    await waitFor('the subscription', () => s.listener.status().consumers === 1);
    raw.pause(); // reads nothing from now on
    let published = 0;
    await waitFor('the stream to be cut off', () => {
      s.publish(200);
      published += 200;
      return s.listener.status().consumers === 0;
    });
    s.publish(500); // after the cut: none of these may reach the client
    published += 500;
    // Now read everything that was sent: the notifications, then the reply, then nothing.
    const lines: Record<string, unknown>[] = [];
    let buf = '';
    raw.setEncoding('utf8');
    raw.on('data', (d: string) => {
      buf += d;
      for (let nl = buf.indexOf('\n'); nl >= 0; nl = buf.indexOf('\n')) {
        lines.push(JSON.parse(buf.slice(0, nl)) as Record<string, unknown>);
        buf = buf.slice(nl + 1);
      }
    });
    raw.resume();
    const reply = await waitFor('the reply', () => lines.find((l) => l.id === 'slow'));
    const result = reply.result as EventsSubscribeResult;
    expect(result.ended).toBe('slow_consumer');
    const notes = lines.filter((l) => l.method === 'events.event');
    expect(notes).toHaveLength(result.events);
    expect(result.events).toBeLessThan(published - 500);
    expect((notes.at(-1)?.params as EventsNotification | undefined)?.event.id).toBe(result.last_event_id);
    expect(lines.at(-1)).toBe(reply);
  });

  it('forgets the stream of a client that closes its connection', async () => {
    const s = await setup();
    const { c } = await s.client();
    void c.call('events.subscribe', {}).catch(() => {});
    await waitFor('the subscription', () => s.listener.status().consumers === 1);
    c.close();
    await waitFor('the consumer to go', () => s.listener.status().consumers === 0);
  });

  it('ends every stream with "shutdown" when the fan-out stops', async () => {
    const s = await setup();
    const { c } = await s.client();
    const stream = c.call<EventsSubscribeResult>('events.subscribe', {});
    await waitFor('the subscription', () => s.listener.status().consumers === 1);
    await s.listener.close();
    expect(await stream).toEqual({ ended: 'shutdown', last_event_id: null, events: 0 });
  });

  it('refuses a bad resume id or filter naming the field, and says when the fan-out is off', async () => {
    const s = await setup();
    const { c } = await s.client();
    const bad = await c.call('events.subscribe', { last_event_id: 'abc' }).catch((e: unknown) => e);
    expect(bad).toMatchObject({
      code: 'validation_failed',
      errors: [{ field: 'params/last_event_id', message: 'must be an id such as "1234" or "1234.2"' }],
    });
    await expect(c.call('events.subscribe', { types: ['inbox'] })).rejects.toMatchObject({
      code: 'validation_failed',
      message: 'params: unknown field types',
    });
    await expect(c.call('events.subscribe', { type: 'inbox' })).rejects.toMatchObject({
      code: 'validation_failed',
    });
    const off = await setup({ off: true });
    const o = await off.client();
    await expect(o.c.call('events.subscribe', {})).rejects.toMatchObject({ code: 'unavailable' });
  });
});
