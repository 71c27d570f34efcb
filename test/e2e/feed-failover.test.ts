// The feed under failure with real tower processes: one of two PostgreSQL replicas killed
// with -9 during a burst of 10 000 node events (the client, the `eventsource` package, moves to
// the other replica and resumes by id), and a consumer that stops reading being cut off while
// another keeps receiving.
import { readFileSync } from 'node:fs';
import { connect } from 'node:net';
import { join } from 'node:path';
import { EventSource } from 'eventsource';
import { afterEach, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { PAGE } from '../../src/tower/feed/hub.js';
import { REPLAY_SOFT_LIMIT, STREAM_BUFFER_LIMIT } from '../../src/tower/feed/routes.js';
import { openStream } from '../support/feed-stream.js';
import { createTestSchema } from '../support/pg.js';
import { waitFor } from '../support/poll.js';
import { startTowerProc, stopAll } from '../support/procs.js';
import { makeTempDir } from '../support/tmp.js';

const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  await stopAll();
  for (const c of cleanups.splice(0).reverse()) await c();
});

function home(): string {
  const tmp = makeTempDir('svc-feed-fo-');
  cleanups.push(() => tmp.remove());
  return tmp.dir;
}

async function post(url: string, token: string, path: string, body: unknown): Promise<number> {
  const res = await fetch(url + path, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  await res.arrayBuffer();
  return res.status;
}

async function registerNode(url: string, admin: string, hostname: string): Promise<string> {
  const res = await fetch(`${url}/nodes`, {
    method: 'POST',
    headers: { authorization: `Bearer ${admin}`, 'content-type': 'application/json' },
    body: JSON.stringify({ hostname }),
  });
  expect(res.status).toBe(201);
  return ((await res.json()) as { jwt: string }).jwt;
}

/** The tower's /metrics as name{labels} → value. */
async function metrics(url: string, token: string): Promise<Map<string, number>> {
  const res = await fetch(`${url}/metrics`, { headers: { authorization: `Bearer ${token}` } });
  expect(res.status).toBe(200);
  const out = new Map<string, number>();
  for (const line of (await res.text()).split('\n')) {
    const m = /^(svc_feed_[a-z_]+(?:\{[^}]*\})?) (\S+)$/.exec(line);
    if (m?.[1] && m[2]) out.set(m[1], Number(m[2]));
  }
  return out;
}

/** Bytes of one event of these tests on the wire (4 KiB filler plus envelope), from above. */
const FRAME_BYTES = 4096 + 1024;
/**
 * What one stalled stream may hold on the tower: the cut-off limit is checked before each
 * pass of the hub, and a pass carries at most one page of events. The burst is far larger.
 */
const STALLED_BOUND = STREAM_BUFFER_LIMIT + PAGE * FRAME_BYTES;

describe('feed failover', () => {
  it('loses and doubles nothing when one of two PostgreSQL replicas is killed during a burst', async () => {
    const schema = await createTestSchema();
    cleanups.push(() => schema.drop());
    const h1 = home();
    const flags = ['--database', schema.url, '--rate-limit', '0'];
    const a = await startTowerProc({ SVC_HOME: h1 }, flags);
    const b = await startTowerProc({ SVC_HOME: home() }, flags);
    const admin = readFileSync(join(h1, 'tower', 'admin.token'), 'utf8').trim();
    const jwt = await registerNode(a.url, admin, 'burst-pg');

    // The client starts on replica a; when a connection fails it tries the other replica
    // (what a load balancer in front of the replicas does), resuming with Last-Event-ID.
    let target = a.url;
    const got: { id: string; n: number }[] = [];
    let reconnects = 0;
    const es = new EventSource(`${a.url}/events/stream?type=progress&last_event_id=0`, {
      fetch: async (input, init) => {
        const url = String(input).replace(a.url, target);
        try {
          return await fetch(url, {
            ...init,
            headers: { ...(init?.headers as Record<string, string>), authorization: `Bearer ${admin}` },
          });
        } catch (e) {
          target = target === a.url ? b.url : a.url;
          reconnects++;
          throw e;
        }
      },
    });
    cleanups.push(() => es.close());
    es.onmessage = (m) => {
      got.push({ id: m.lastEventId, n: (JSON.parse(m.data) as { payload: { n: number } }).payload.n });
    };

    const TOTAL = 10_000;
    const BATCH = 250;
    const PUBLISHERS = 4;
    let aAlive = true;
    let accepted = 0;
    // Each publisher sends its share of the numbered batches, alternating replicas; like
    // svcd's outbox it retries a batch (on the other replica) until one takes it.
    const publish = async (p: number) => {
      for (let start = p * BATCH; start < TOTAL; start += BATCH * PUBLISHERS) {
        const events = Array.from({ length: BATCH }, (_, i) => ({
          key: `n${start + i}`,
          type: 'progress',
          agent_id: 'burst',
          payload: { n: start + i },
        }));
        let useA = aAlive && (start / BATCH) % 2 === 0;
        await waitFor(
          `batch ${start}`,
          async () => {
            const url = useA ? a.url : b.url;
            useA = !useA && aAlive;
            return (await post(url, jwt, '/nodes/events', { events }).catch(() => 0)) === 202;
          },
          { timeoutMs: 90_000, intervalMs: 20 },
        );
        accepted += BATCH;
      }
    };
    const publishers = Array.from({ length: PUBLISHERS }, (_, p) => publish(p));
    // Kill replica a mid-burst, with batches in flight on it.
    await waitFor('half the burst accepted', () => accepted >= TOTAL / 2, {
      timeoutMs: 90_000,
      intervalMs: 5,
    });
    a.kill('SIGKILL');
    aAlive = false;
    await a.exited;
    await Promise.all(publishers);

    await waitFor('every event at the client', () => got.length >= TOTAL, { timeoutMs: 90_000 });
    expect(got.length).toBe(TOTAL);
    expect(new Set(got.map((g) => g.n)).size).toBe(TOTAL);
    expect(Math.min(...got.map((g) => g.n))).toBe(0);
    expect(Math.max(...got.map((g) => g.n))).toBe(TOTAL - 1);
    const ids = got.map((g) => BigInt(g.id));
    expect(ids.every((id, i) => i === 0 || id > (ids[i - 1] as bigint))).toBe(true);
    expect(target).toBe(b.url);
    expect(reconnects).toBeGreaterThanOrEqual(1);
  });

  it('cuts off a consumer that stops reading while another keeps receiving; it resumes by id', async () => {
    const h = home();
    const tower = await startTowerProc({ SVC_HOME: h }, ['--rate-limit', '0']);
    const admin = readFileSync(join(h, 'tower', 'admin.token'), 'utf8').trim();
    const jwt = await registerNode(tower.url, admin, 'stall');
    const { hostname, port } = new URL(tower.url);

    // The stalled consumer: a raw connection that sends its request and then never reads.
    const stalled = connect(Number(port), hostname);
    let raw = '';
    let closedByServer = false;
    stalled.on('data', (d: Buffer) => {
      raw += d.toString('utf8');
    });
    stalled.on('error', () => {});
    stalled.on('close', () => {
      closedByServer = true;
    });
    stalled.write(
      `GET /events/stream?type=progress HTTP/1.1\r\nHost: ${hostname}\r\nAuthorization: Bearer ${admin}\r\nAccept: text/event-stream\r\n\r\n`,
    );
    await waitFor('the stalled stream to open', () => raw.includes('retry:'));
    stalled.pause();
    const healthy = openStream(`${tower.url}/events/stream?type=progress`, admin);
    await waitFor('the healthy stream to open', () => healthy.status() === 200);

    // 4 000 events of 4 KiB: far more than the per-stream limit plus the kernel's buffers.
    // Each batch (~420 KiB) waits for the healthy consumer to have read the one before, so
    // however slowly this process runs, the healthy stream never nears the limit.
    const TOTAL = 4000;
    const BATCH = 100;
    const filler = 'x'.repeat(4096);
    for (let start = 0; start < TOTAL; start += BATCH) {
      const events = Array.from({ length: BATCH }, (_, i) => ({
        key: `s${start + i}`,
        type: 'progress',
        payload: { n: start + i, filler },
      }));
      expect(await post(tower.url, jwt, '/nodes/events', { events })).toBe(202);
      await waitFor('the healthy consumer to read the batch', () => healthy.got.length >= start + BATCH);
    }
    await waitFor('the healthy consumer to get everything', () => healthy.got.length >= TOTAL, {
      timeoutMs: 90_000,
    });
    expect(healthy.got.map((e) => (e.data.payload as { n: number }).n)).toEqual(
      Array.from({ length: TOTAL }, (_, i) => i),
    );

    // Reading again, the stalled consumer finds its stream was ended by the tower, short of
    // the burst; what it did get is an exact prefix.
    stalled.resume();
    await waitFor('the tower to have closed the stalled stream', () => closedByServer, { timeoutMs: 90_000 });
    const ids = [...raw.matchAll(/^id: (\d+)\n[^\n]*\n\n/gm)].map((m) => m[1] as string);
    const all = healthy.got.map((e) => e.id as string);
    expect(ids.length).toBeLessThan(TOTAL);
    expect(ids).toEqual(all.slice(0, ids.length));

    // Memory stayed flat: the tower held at most the limit plus one pass for the stalled
    // stream (the burst was 4 000 x 4 KiB), cut it off once, and holds nothing unsent now.
    expect(TOTAL * 4096).toBeGreaterThan(4 * STALLED_BOUND);
    const m = await metrics(tower.url, admin);
    expect(m.get('svc_feed_streams_cut_off_total{transport="sse"}')).toBe(1);
    expect(m.get('svc_feed_stream_unsent_bytes_max')).toBeGreaterThan(STREAM_BUFFER_LIMIT);
    expect(m.get('svc_feed_stream_unsent_bytes_max')).toBeLessThanOrEqual(STALLED_BOUND);
    expect(m.get('svc_feed_unsent_bytes')).toBe(0);
    expect(m.get('svc_feed_streams')).toBe(1);

    const resumed = openStream(`${tower.url}/events/stream?type=progress`, admin, {
      'last-event-id': ids[ids.length - 1] ?? '0',
    });
    await waitFor('the rest after resuming', () => resumed.got.length >= TOTAL - ids.length, {
      timeoutMs: 90_000,
    });
    expect(resumed.got.map((e) => e.id)).toEqual(all.slice(ids.length));
    await Promise.all([healthy.close(), resumed.close()]);
  });

  it('cuts off a WebSocket consumer that stops reading while another keeps receiving', async () => {
    const h = home();
    const tower = await startTowerProc({ SVC_HOME: h }, ['--rate-limit', '0']);
    const admin = readFileSync(join(h, 'tower', 'admin.token'), 'utf8').trim();
    const jwt = await registerNode(tower.url, admin, 'stall-ws');
    const open = (onMessage: (data: string) => void) => {
      const ws = new WebSocket(`${tower.url.replace('http', 'ws')}/events/ws?type=progress`, {
        headers: { authorization: `Bearer ${admin}` },
      });
      ws.on('message', (d) => onMessage(String(d)));
      cleanups.push(() => ws.terminate());
      return new Promise<WebSocket>((resolve, reject) => {
        ws.once('open', () => resolve(ws));
        ws.once('error', reject);
      });
    };
    let stalledCount = 0;
    let stalledClosed = false;
    const stalled = await open(() => {
      stalledCount++;
    });
    stalled.on('close', () => {
      stalledClosed = true;
    });
    // Stop reading the TCP connection underneath the client.
    (stalled as unknown as { _socket: { pause(): void; resume(): void } })._socket.pause();
    const healthy: number[] = [];
    await open((d) => healthy.push((JSON.parse(d) as { payload: { n: number } }).payload.n));

    // Paced on the healthy consumer, as in the SSE test above.
    const TOTAL = 4000;
    const BATCH = 100;
    const filler = 'x'.repeat(4096);
    for (let start = 0; start < TOTAL; start += BATCH) {
      const events = Array.from({ length: BATCH }, (_, i) => ({
        key: `w${start + i}`,
        type: 'progress',
        payload: { n: start + i, filler },
      }));
      expect(await post(tower.url, jwt, '/nodes/events', { events })).toBe(202);
      await waitFor('the healthy consumer to read the batch', () => healthy.length >= start + BATCH);
    }
    await waitFor('the healthy consumer to get everything', () => healthy.length >= TOTAL, {
      timeoutMs: 90_000,
    });
    expect(healthy).toEqual(Array.from({ length: TOTAL }, (_, i) => i));
    (stalled as unknown as { _socket: { resume(): void } })._socket.resume();
    await waitFor('the tower to have dropped the stalled connection', () => stalledClosed, {
      timeoutMs: 90_000,
    });
    expect(stalledCount).toBeLessThan(TOTAL);
    const m = await metrics(tower.url, admin);
    expect(m.get('svc_feed_streams_cut_off_total{transport="ws"}')).toBe(1);
    expect(m.get('svc_feed_stream_unsent_bytes_max')).toBeLessThanOrEqual(STALLED_BOUND);
    expect(m.get('svc_feed_unsent_bytes')).toBe(0);
  });

  it('paces a large WebSocket replay to its consumer instead of buffering it', async () => {
    const h = home();
    const tower = await startTowerProc({ SVC_HOME: h }, ['--rate-limit', '0']);
    const admin = readFileSync(join(h, 'tower', 'admin.token'), 'utf8').trim();
    const jwt = await registerNode(tower.url, admin, 'replay-ws');
    // 32 MiB of history: more than the kernel's socket buffers on both ends can take.
    const TOTAL = 8000;
    const BATCH = 200;
    const filler = 'x'.repeat(4096);
    for (let start = 0; start < TOTAL; start += BATCH) {
      const events = Array.from({ length: BATCH }, (_, i) => ({
        key: `r${start + i}`,
        type: 'progress',
        payload: { n: start + i, filler },
      }));
      expect(await post(tower.url, jwt, '/nodes/events', { events })).toBe(202);
    }

    // A consumer that replays everything but does not read until the replay has had to wait.
    const got: number[] = [];
    const ws = new WebSocket(`${tower.url.replace('http', 'ws')}/events/ws?type=progress&last_event_id=0`, {
      headers: { authorization: `Bearer ${admin}` },
    });
    cleanups.push(() => ws.terminate());
    ws.on('message', (d) => got.push((JSON.parse(String(d)) as { payload: { n: number } }).payload.n));
    await new Promise<void>((resolve, reject) => {
      ws.once('open', () => resolve());
      ws.once('error', reject);
    });
    const socket = (ws as unknown as { _socket: { pause(): void; resume(): void } })._socket;
    socket.pause();
    await waitFor('the replay to wait for the consumer', async () => {
      const m = await metrics(tower.url, admin);
      return (m.get('svc_feed_replay_waits_total{transport="ws"}') ?? 0) >= 1;
    });
    // While it waits, the tower holds no more than the soft limit plus one event for it.
    const paused = await metrics(tower.url, admin);
    expect(paused.get('svc_feed_unsent_bytes')).toBeLessThanOrEqual(REPLAY_SOFT_LIMIT + FRAME_BYTES);
    expect(got.length).toBeLessThan(TOTAL);

    // Reading again, it gets the whole history in order, and was never cut off.
    socket.resume();
    await waitFor('the whole replay', () => got.length >= TOTAL, { timeoutMs: 90_000 });
    expect(got).toEqual(Array.from({ length: TOTAL }, (_, i) => i));
    const m = await metrics(tower.url, admin);
    expect(m.get('svc_feed_streams_cut_off_total{transport="ws"}')).toBe(0);
    expect(m.get('svc_feed_stream_unsent_bytes_max')).toBeLessThanOrEqual(REPLAY_SOFT_LIMIT + FRAME_BYTES);
    expect(m.get('svc_feed_replay_waits_total{transport="ws"}')).toBeGreaterThan(1);
  });
});
