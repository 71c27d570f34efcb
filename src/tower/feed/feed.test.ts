import { EventSource } from 'eventsource';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { type OpenStream, openStream } from '../../../test/support/feed-stream.js';
import { waitFor } from '../../../test/support/poll.js';
import { STORES, startTestTower, type TestTower } from '../../../test/support/tower.js';
import { FakeClock } from '../../lib/clock.js';
import { pruneEvents } from './retention.js';

describe.each(STORES)('feed on %s', (store) => {
  let t: TestTower;
  let base: string;
  const clock = new FakeClock(Date.parse('2026-11-23T10:00:00Z'));

  beforeAll(async () => {
    t = await startTestTower(store, { clock, rateLimit: { limit: 1000, windowMs: 60_000 } });
    base = await t.tower.listen('127.0.0.1', 0);
  });
  afterAll(async () => {
    await t?.close();
  });

  const domain = async (name: string) => (await t.call('POST', '/domains', { name })).body as { id: string };
  const mission = async (d: string, name: string) =>
    (await t.call('POST', `/domains/${d}/m`, { name })).body as { id: string };

  it('replays after an id, then goes live, each event once and in order', async () => {
    const d = await domain('replay');
    const before = openStream(`${base}/events/stream?last_event_id=0&domain_id=${d.id}`, t.adminToken);
    await waitFor('the domain event', () => before.got.length >= 1);
    for (let i = 0; i < 5; i++) await mission(d.id, `m${i}`);
    await waitFor('six events', () => before.got.length >= 6);
    const ids = before.got.map((e) => BigInt(e.id ?? '0'));
    expect([...ids].sort((a, b) => (a < b ? -1 : 1))).toEqual(ids);
    expect(new Set(ids.map(String)).size).toBe(6);
    expect(before.got[0]?.data).toMatchObject({
      type: 'matrix',
      domain_id: d.id,
      payload: { entity: 'domain' },
    });
    expect(before.got[1]?.data.rate_limit).toMatchObject({ limit: 1000 });

    // Resume after the third event: exactly the rest, then live.
    const third = before.got[2]?.id ?? '';
    const resumed = openStream(`${base}/events/stream?domain_id=${d.id}`, t.adminToken, {
      'last-event-id': third,
    });
    await waitFor('the three later events', () => resumed.got.length >= 3);
    await mission(d.id, 'live');
    await waitFor('the live event on both', () => resumed.got.length >= 4 && before.got.length >= 7);
    expect(resumed.got.map((e) => e.id)).toEqual(before.got.slice(3).map((e) => e.id));
    await before.close();
    await resumed.close();
  });

  it('sends a reset first for an unknown id or one older than retention', async () => {
    const d = await domain('reset');
    const unknown = openStream(`${base}/events/stream?last_event_id=999999999`, t.adminToken);
    await waitFor('the reset', () => unknown.got.length >= 1);
    expect(unknown.got[0]).toMatchObject({ event: 'reset', data: { reason: 'unknown' } });
    await unknown.close();

    // Prune as if eight days had passed: all but the newest event go, and a resume from 0
    // gets a reset, then that event.
    await mission(d.id, 'old');
    const live = openStream(`${base}/events/stream?domain_id=${d.id}`, t.adminToken);
    await waitFor('the stream to open', () => live.status() === 200);
    await mission(d.id, 'new');
    await waitFor('the newest event to be readable', () =>
      live.got.some((e) => (e.data.payload as { name?: string }).name === 'new'),
    );
    await live.close();
    const pruned = await pruneEvents(t.tower.store, clock.now() + 8 * 86_400_000, 7 * 86_400_000);
    expect(pruned).toBeGreaterThan(0);
    const old = openStream(`${base}/events/stream?last_event_id=0&domain_id=${d.id}`, t.adminToken);
    await waitFor('reset and the kept event', () => old.got.length >= 2);
    expect(old.got[0]).toMatchObject({ event: 'reset', data: { reason: 'retention', last_event_id: '0' } });
    expect(old.got[1]?.data).toMatchObject({ payload: { entity: 'mission', name: 'new' } });
    await old.close();

    // The tower records the highest id it pruned: a resume from it has missed nothing (no
    // reset, however far the next id is); one from below it gets a reset that says where to
    // resume.
    const through = String(
      (await t.tower.store.db.selectFrom('event_pruned').select('through').executeTakeFirstOrThrow()).through,
    );
    const kept = BigInt(String(old.got[1]?.id));
    expect(BigInt(through)).toBeLessThan(kept);
    const exact = openStream(
      `${base}/events/stream?last_event_id=${through}&domain_id=${d.id}`,
      t.adminToken,
    );
    await waitFor('the kept event', () => exact.got.length >= 1);
    expect(exact.got[0]?.event).not.toBe('reset');
    expect(exact.got[0]?.data).toMatchObject({ payload: { entity: 'mission', name: 'new' } });
    await exact.close();
    const below = openStream(
      `${base}/events/stream?last_event_id=${BigInt(through) - 1n}&domain_id=${d.id}`,
      t.adminToken,
    );
    await waitFor('reset and the kept event', () => below.got.length >= 2);
    expect(below.got[0]).toMatchObject({
      event: 'reset',
      data: { reason: 'retention', resume_after: through },
    });
    expect(below.got[1]?.data).toMatchObject({ payload: { entity: 'mission', name: 'new' } });
    await below.close();
  });

  it('shows a domain token only its domains, and filters by type and mission', async () => {
    const a = await domain('iso-a');
    const b = await domain('iso-b');
    const tok = (await t.call('POST', '/tokens', { name: 'a-only', scopes: ['feed:read'], domains: [a.id] }))
      .body as { token: string };
    const s = openStream(`${base}/events/stream`, tok.token);
    await waitFor('the stream to open', () => s.status() === 200);
    const ma = await mission(a.id, 'in-a');
    await mission(b.id, 'in-b');
    await mission(a.id, 'in-a-2');
    await waitFor('two events of domain a', () => s.got.length >= 2);
    expect(s.got.every((e) => e.data.domain_id === a.id)).toBe(true);
    const filtered = openStream(
      `${base}/events/stream?last_event_id=0&mission_id=${ma.id}&type=matrix`,
      tok.token,
    );
    await waitFor('the mission event', () => filtered.got.length >= 1);
    await t.call('POST', `/domains/${a.id}/m/${ma.id}/t`, { title: 'task' });

    // Earlier tests pruned the log: a resume from 0 starts with a reset.
    expect(filtered.got[0]?.event).toBe('reset');
    await waitFor('the task event', () => filtered.got.length >= 3);
    expect(filtered.got.slice(1).map((e) => e.data.mission_id)).toEqual([ma.id, ma.id]);
    // Another domain in the filter does not widen what the token may see.
    const other = openStream(`${base}/events/stream?last_event_id=0&domain_id=${b.id}`, tok.token);
    await mission(a.id, 'marker');
    await waitFor('the marker', () => s.got.length >= 3);
    expect(other.got.filter((e) => e.event !== 'reset')).toEqual([]);
    await Promise.all([s.close(), filtered.close(), other.close()]);
  });

  it('closes a stream whose token is revoked', async () => {
    const created = (await t.call('POST', '/tokens', { name: 'short', scopes: ['feed:read'] })).body as {
      id: string;
      token: string;
    };
    const s = openStream(`${base}/events/stream`, created.token);
    await waitFor('the stream to open', () => s.status() === 200);
    expect((await t.call('DELETE', `/tokens/${created.id}`)).status).toBe(200);
    // The re-check runs on the tower's clock.
    await waitFor('the stream to close', async () => {
      await clock.advance(500);
      return s.ended();
    });
  });

  it('closes a stream when its token expires, and only that one', async () => {
    const short = (await t.call('POST', '/tokens', { name: 'ttl', scopes: ['feed:read'], ttl_seconds: 5 }))
      .body as { token: string };
    const expiring = openStream(`${base}/events/stream`, short.token);
    const lasting = openStream(`${base}/events/stream`, t.adminToken);
    await waitFor('both streams to open', () => expiring.status() === 200 && lasting.status() === 200);
    await clock.advance(4000);
    expect(expiring.ended()).toBe(false);
    // The token's last valid instant passes; the next re-check (every 500 ms) closes it.
    await waitFor('the expired stream to close', async () => {
      await clock.advance(500);
      return expiring.ended();
    });
    expect(lasting.ended()).toBe(false);
    await lasting.close();
  });

  it('refuses a malformed last event id and a missing token', async () => {
    const bad = await fetch(`${base}/events/stream?last_event_id=abc`, {
      headers: { authorization: `Bearer ${t.adminToken}` },
    });
    expect(bad.status).toBe(400);
    expect(((await bad.json()) as { code: string }).code).toBe('validation_failed');
    expect((await fetch(`${base}/events/stream`)).status).toBe(401);
  });

  it('is read by the eventsource package, and over WebSocket', async () => {
    const d = await domain('clients');
    const es = new EventSource(`${base}/events/stream?last_event_id=0&domain_id=${d.id}`, {
      fetch: (input, init) =>
        fetch(input, { ...init, headers: { ...init?.headers, authorization: `Bearer ${t.adminToken}` } }),
    });
    const viaEs: string[] = [];
    es.onmessage = (m) => viaEs.push(m.lastEventId);
    const ws = new WebSocket(`${base.replace('http', 'ws')}/events/ws?last_event_id=0&domain_id=${d.id}`, {
      headers: { authorization: `Bearer ${t.adminToken}` },
    });
    const viaWs: string[] = [];
    ws.on('message', (m) => {
      const msg = JSON.parse(String(m)) as { id?: string; type: string };
      if (msg.type !== 'reset') viaWs.push(msg.id ?? '');
    });
    await mission(d.id, 'x');
    await waitFor('both clients', () => viaEs.length >= 2 && viaWs.length >= 2);
    expect(viaWs).toEqual(viaEs);
    es.close();
    ws.close();
  });

  /**
   * Until `s` shows an event: a stream without a last event id starts at the log's head once
   * its subscription is in place, which its response's head does not say. A node of its own
   * publishes until the stream sees one; from then on the stream gets every new event.
   */
  async function live(s: OpenStream, type: 'progress' | 'matrix') {
    const poker = (await t.call('POST', '/nodes', { hostname: `poker-${type}-${store}` })).body as {
      id: string;
      jwt: string;
    };
    let k = 0;
    await waitFor('the stream to be live', async () => {
      await t.call(
        'POST',
        '/nodes/events',
        { events: [{ key: `poke-${k++}`, type, payload: {} }] },
        poker.jwt,
      );
      return s.got.some((e) => (e.data.payload as { node_id?: string } | undefined)?.node_id === poker.id);
    });
  }

  it('takes node events once per key and stamps the node id', async () => {
    const reg = (await t.call('POST', '/nodes', { hostname: `feed-node-${store}` })).body as {
      id: string;
      jwt: string;
    };
    const s = openStream(`${base}/events/stream?type=progress`, t.adminToken);
    await live(s, 'progress');
    const body = {
      events: [{ key: 'k1', type: 'progress', agent_id: 'a1', payload: { text: 'hi', node_id: 'forged' } }],
    };
    const first = await t.call('POST', '/nodes/events', body, reg.jwt);
    expect(first.status).toBe(202);
    expect(first.body).toEqual({ accepted: 1, duplicates: 0 });
    expect((await t.call('POST', '/nodes/events', body, reg.jwt)).body).toEqual({
      accepted: 0,
      duplicates: 1,
    });
    const got = await waitFor('the progress event', () => s.got.find((e) => e.data.agent_id === 'a1'));
    expect(got.data).toMatchObject({ type: 'progress', agent_id: 'a1', payload: { node_id: reg.id } });
    expect((await t.call('POST', '/nodes/events', body)).status).toBe(403);
    await s.close();
  });

  it("keeps a batch's order, takes a key given twice in it once, and keys are each node's own", async () => {
    const reg = async (name: string) =>
      (await t.call('POST', '/nodes', { hostname: `${name}-${store}` })).body as { id: string; jwt: string };
    const [a, b] = [await reg('batch-a'), await reg('batch-b')];
    const s = openStream(`${base}/events/stream?type=matrix`, t.adminToken);
    await live(s, 'matrix');
    const ev = (key: string, status: string | null) => ({ key, type: 'matrix', status, payload: { key } });
    const batch = { events: [ev('k3', 'third'), ev('k1', 'first'), ev('k3', 'again'), ev('k2', null)] };
    expect((await t.call('POST', '/nodes/events', batch, a.jwt)).body).toEqual({
      accepted: 3,
      duplicates: 1,
    });
    // Half of it again with one new key: only the new one lands.
    const retry = { events: [ev('k1', 'first'), ev('k4', 'fourth')] };
    expect((await t.call('POST', '/nodes/events', retry, a.jwt)).body).toEqual({
      accepted: 1,
      duplicates: 1,
    });
    // The same keys from another node are that node's own.
    expect((await t.call('POST', '/nodes/events', { events: [ev('k1', 'b')] }, b.jwt)).body).toEqual({
      accepted: 1,
      duplicates: 0,
    });
    const ours = () =>
      s.got
        .map((e) => e.data as { status: string | null; payload: { key: string; node_id: string } })
        .filter((d) => d.payload.node_id === a.id || d.payload.node_id === b.id);
    await waitFor('the five events', () => ours().length >= 5);
    const seen = ours().map((d) => [d.payload.node_id === a.id ? 'a' : 'b', d.payload.key, d.status]);
    expect(seen).toEqual([
      ['a', 'k3', 'third'],
      ['a', 'k1', 'first'],
      ['a', 'k2', null],
      ['a', 'k4', 'fourth'],
      ['b', 'k1', 'b'],
    ]);
    await s.close();
  });
});
