// svcd's local fan-out end to end: a real tower, a real svcd with [fanout] on a loopback port,
// consumers on its /events and /events/ws, the tower stopped and started again under it, the
// node's rate limit spent, and messages published on the real Mosquitto with mosquitto_pub.
import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { WebSocket } from 'ws';
import { mgmtCall } from '../../src/cli/mgmt-client.js';
import { type OpenStream, openStream, type Received } from '../support/feed-stream.js';
import { startNodeStack } from '../support/node-stack.js';
import { waitFor } from '../support/poll.js';
import { type Proc, SVCD_BIN, spawnProc, startTowerProc, stopAll, type TowerProc } from '../support/procs.js';

const execFileP = promisify(execFile);

interface FanoutStatus {
  enabled: boolean;
  listen: string;
  token_file: string | null;
  upstream: { state: string; last_event_id: string | null; outages: { up_at: string | null }[] };
  reconnects: string[];
  throttles: { held: number; until: string; resumed_at: string | null }[];
  mqtt: { subscribed: boolean; received: number } | null;
}

/** A tower, a registered node and its svcd with the fan-out on 127.0.0.1:0. */
async function startNode(name: string, towerArgs: string[], fanoutToml: string) {
  const stack = await startNodeStack({
    name: `fanout-${name}`,
    hostname: `fanout-${name}`,
    towerArgs,
    svcdFiles: { 'config.toml': `[fanout]\nenable = true\nlisten = "127.0.0.1:0"\n${fanoutToml}` },
  });
  const status = () => mgmtCall<FanoutStatus>(stack.mgmtSock, 'fanout.status');
  const first = await waitFor(
    'svcd fan-out to follow the tower',
    async () => {
      const s = await status();
      return s.upstream.state === 'up' ? s : null;
    },
    { timeoutMs: 30_000 },
  );
  const token = readFileSync(first.token_file as string, 'utf8').trim();
  return {
    tmp: stack.tmp,
    env: stack.env,
    home: stack.home,
    tower: stack.tower,
    svcd: stack.svcd as Proc,
    status,
    admin: stack.adminToken,
    jwt: stack.node.jwt,
    token,
    listen: first.listen,
  };
}

async function createDomain(towerUrl: string, admin: string, name: string): Promise<string> {
  const res = await fetch(`${towerUrl}/domains`, {
    method: 'POST',
    headers: { authorization: `Bearer ${admin}`, 'content-type': 'application/json' },
    body: JSON.stringify({ name }),
  });
  expect(res.status, await res.clone().text()).toBe(201);
  return ((await res.json()) as { id: string }).id;
}

/** The domains created (in order) as seen in a consumer's stream. */
function createdDomains(got: Received[]): string[] {
  return got
    .filter((r) => r.event === 'message' && r.data.type === 'matrix')
    .map((r) => r.data.payload as { entity?: string; action?: string; name?: string })
    .filter((p) => p.entity === 'domain' && p.action === 'created')
    .map((p) => p.name as string);
}

function towerIds(got: Received[]): string[] {
  return got.filter((r) => r.event === 'message' && /^[0-9]+$/.test(r.id ?? '')).map((r) => r.id as string);
}

describe('svcd local fan-out with a real tower', () => {
  let node: Awaited<ReturnType<typeof startNode>>;
  let consumer: OpenStream;
  const topic = `svc-e2e-${process.pid}-${Date.now()}`;

  beforeAll(async () => {
    node = await startNode(
      'main',
      [],
      `[fanout.mqtt]\nurl = "mqtt://127.0.0.1:1883"\ntopics = ["${topic}/#"]\n`,
    );
    consumer = openStream(`${node.listen}/events`, node.token);
    await waitFor('the consumer to connect', () => consumer.status() === 200);
  }, 90_000);
  afterAll(async () => {
    await consumer?.close();
    await stopAll();
    node?.tmp.remove();
  });

  it('refuses a consumer without the token and a bad Last-Event-ID, naming the field', async () => {
    const anon = await fetch(`${node.listen}/events`);
    expect(anon.status).toBe(401);
    expect(((await anon.json()) as { code: string }).code).toBe('unauthenticated');
    const bad = await fetch(`${node.listen}/events?last_event_id=abc`, {
      headers: { authorization: `Bearer ${node.token}` },
    });
    expect(bad.status).toBe(400);
    expect(((await bad.json()) as { errors: { field: string }[] }).errors[0]?.field).toBe('last_event_id');
  });

  it('relays the tower events in order to SSE and WebSocket consumers, and resumes by Last-Event-ID', async () => {
    const ws = new WebSocket(`${node.listen.replace('http', 'ws')}/events/ws`, {
      headers: { authorization: `Bearer ${node.token}` },
    });
    const frames: Record<string, unknown>[] = [];
    ws.on('message', (d) => frames.push(JSON.parse(String(d)) as Record<string, unknown>));
    await new Promise((resolve, reject) => ws.once('open', resolve).once('error', reject));
    const names = Array.from({ length: 12 }, (_, i) => `order-${i}`);
    for (const n of names) await createDomain(node.tower.url, node.admin, n);
    await waitFor('all events on /events', () => createdDomains(consumer.got).length >= names.length);
    expect(createdDomains(consumer.got)).toEqual(names);
    const ids = towerIds(consumer.got);
    expect(ids.map(BigInt)).toEqual([...ids.map(BigInt)].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0)));
    // The same events, byte for byte the tower's ids, over the WebSocket.
    await waitFor(
      'all events on /events/ws',
      () => frames.filter((f) => f.type === 'matrix').length >= ids.length,
    );
    expect(frames.map((f) => f.id)).toEqual(ids);
    ws.close();

    // A consumer that saw the 5th event resumes after it from the ring.
    const fifth = ids[4] as string;
    const resumed = openStream(`${node.listen}/events`, node.token, { 'last-event-id': fifth });
    await waitFor('the replay', () => towerIds(resumed.got).length >= ids.length - 5);
    expect(towerIds(resumed.got)).toEqual(ids.slice(5));
    await resumed.close();
    // An id from before this svcd started is a gap: reset first, then all the ring holds.
    const old = openStream(`${node.listen}/events`, node.token, { 'last-event-id': '1' });
    await waitFor('the reset', () => old.got.length >= 1);
    expect(old.got[0]).toMatchObject({ event: 'reset', data: { reason: 'buffer', last_event_id: '1' } });
    await old.close();
  }, 60_000);

  it('re-emits MQTT messages published with mosquitto_pub (JSON parsed, text as text)', async () => {
    await waitFor('the MQTT subscription', async () => (await node.status()).mqtt?.subscribed, {
      timeoutMs: 20_000,
    });
    await execFileP('mosquitto_pub', [
      '-h',
      '127.0.0.1',
      '-p',
      '1883',
      '-t',
      `${topic}/temp`,
      '-m',
      '{"c":21.5}',
    ]);
    await execFileP('mosquitto_pub', [
      '-h',
      '127.0.0.1',
      '-p',
      '1883',
      '-t',
      `${topic}/note`,
      '-m',
      'door open',
    ]);
    const mqttEvents = () =>
      consumer.got.filter((r) => (r.data.payload as { source?: string } | undefined)?.source === 'mqtt');
    await waitFor('both MQTT messages on /events', () => mqttEvents().length >= 2);
    expect(mqttEvents().map((r) => r.data.payload)).toEqual([
      { source: 'mqtt', topic: `${topic}/temp`, payload: { c: 21.5 }, encoding: 'json', retained: false },
      { source: 'mqtt', topic: `${topic}/note`, payload: 'door open', encoding: 'text', retained: false },
    ]);
    for (const r of mqttEvents()) {
      expect(r.event).toBe('message');
      expect(r.data).toMatchObject({ type: 'matrix', id: r.id });
      expect(r.id).toMatch(/^[0-9]+\.[0-9]+$/);
    }
  }, 40_000);

  it('emits matrix-down when the tower stops and matrix-up when it is back, missing nothing', async () => {
    const port = new URL(node.tower.url).port;
    await createDomain(node.tower.url, node.admin, 'before-stop');
    await waitFor('the event before the stop', () => createdDomains(consumer.got).includes('before-stop'));
    // kill -9: the harsher stop (no goodbye on the stream), and a tower with a node attached
    // is slow to finish a graceful stop.
    node.tower.kill('SIGKILL');
    await node.tower.exited;
    const down = await waitFor('matrix-down', () => consumer.got.find((r) => r.event === 'matrix-down'), {
      timeoutMs: 10_000,
    });
    expect(down.data).toMatchObject({
      type: 'matrix',
      payload: { event: 'matrix-down', upstream: node.tower.url },
    });
    expect(typeof (down.data.payload as { error: unknown }).error).toBe('string');

    node.tower = (await startTowerProc(node.env, ['--listen', `127.0.0.1:${port}`])) as TowerProc;
    // Published while svcd is still backing off: it must get them by resuming from its last id.
    const during = ['after-restart-1', 'after-restart-2', 'after-restart-3'];
    for (const n of during) await createDomain(node.tower.url, node.admin, n);
    const up = await waitFor('matrix-up', () => consumer.got.find((r) => r.event === 'matrix-up'), {
      timeoutMs: 60_000,
    });
    expect(up.data.payload).toMatchObject({ event: 'matrix-up', upstream: node.tower.url });
    await waitFor('the events published during the outage', () =>
      during.every((n) => createdDomains(consumer.got).includes(n)),
    );
    const all = createdDomains(consumer.got);
    expect(all.slice(all.indexOf('before-stop'))).toEqual(['before-stop', ...during]);
    // The consumer's view matches the tower's own log, id for id, from before the stop on.
    const seen = towerIds(consumer.got);
    const fromTower = openStream(`${node.tower.url}/events/stream`, node.admin, {
      'last-event-id': seen[0] as string,
    });
    await waitFor('the tower replay', () => towerIds(fromTower.got).length >= seen.length - 1);
    await fromTower.close();
    expect(towerIds(fromTower.got).slice(0, seen.length - 1)).toEqual(seen.slice(1));
    const s = await node.status();
    expect(s.upstream.state).toBe('up');
    expect(s.reconnects.length).toBeGreaterThanOrEqual(1);
    expect(s.upstream.outages.at(-1)?.up_at).not.toBeNull();
  }, 120_000);

  it('resumes after an svcd restart from its saved position: a consumer misses nothing published meanwhile', async () => {
    await createDomain(node.tower.url, node.admin, 'before-svcd-restart');
    await waitFor('the event before the restart', () =>
      createdDomains(consumer.got).includes('before-svcd-restart'),
    );
    const lastSeen = consumer.got.at(-1)?.id as string;
    await consumer.close();
    node.svcd.kill('SIGTERM');
    await node.svcd.exited;
    const during = ['svcd-down-1', 'svcd-down-2'];
    for (const n of during) await createDomain(node.tower.url, node.admin, n);
    node.svcd = spawnProc(SVCD_BIN, ['run', '--backend-url', node.tower.url], node.env);
    const s = await waitFor(
      'svcd to follow the tower again',
      async () => {
        if (node.svcd.child.exitCode !== null) throw new Error(`svcd exited: ${node.svcd.stderr()}`);
        const st = await node.status();
        return st.upstream.state === 'up' ? st : null;
      },
      { timeoutMs: 30_000 },
    );
    const token = readFileSync(s.token_file as string, 'utf8').trim();
    consumer = openStream(`${s.listen}/events`, token, { 'last-event-id': lastSeen });
    await waitFor('the events published while svcd was down', () =>
      during.every((n) => createdDomains(consumer.got).includes(n)),
    );
    expect(consumer.got.filter((r) => r.event === 'reset')).toEqual([]);
    expect(createdDomains(consumer.got)).toEqual(during);
  }, 90_000);
});

describe('svcd local fan-out under a spent rate limit', () => {
  let node: Awaited<ReturnType<typeof startNode>>;
  let svcdProc: Proc;

  beforeAll(async () => {
    // A 5 s window keeps the hold short; 40 requests leave the test room for its own calls.
    node = await startNode('ratelimit', ['--rate-limit', '40/5s'], '');
    svcdProc = node.svcd;
  }, 90_000);
  afterAll(async () => {
    await stopAll();
    node?.tmp.remove();
  });

  it('holds events while remaining is 0 and delivers them, in order, after reset_at + 1 s', async () => {
    expect(svcdProc.child.exitCode).toBeNull();
    const consumer = openStream(`${node.listen}/events`, node.token);
    await waitFor('the consumer to connect', () => consumer.status() === 200);
    const arrivals = new Map<string, number>();
    const poll = setInterval(() => {
      for (const r of consumer.got) if (r.id && !arrivals.has(r.id)) arrivals.set(r.id, Date.now());
    }, 5);
    try {
      // The window can roll over between spending the node's quota and publishing: try again then.
      for (let attempt = 1; ; attempt++) {
        const names = [1, 2, 3].map((i) => `held-${attempt}-${i}`);
        for (;;) {
          const r = await fetch(`${node.tower.url}/nodes`, {
            headers: { authorization: `Bearer ${node.jwt}` },
          });
          await r.body?.cancel();
          if (r.status === 429) break;
        }
        for (const n of names) await createDomain(node.tower.url, node.admin, n);
        await waitFor('the held events', () => names.every((n) => createdDomains(consumer.got).includes(n)), {
          timeoutMs: 30_000,
        });
        const got = consumer.got.filter((r) =>
          names.includes((r.data.payload as { name?: string }).name ?? ''),
        );
        const block = got[0]?.data.rate_limit as { remaining: number; reset_at: string };
        if (block.remaining !== 0 && attempt < 5) continue;
        expect(block.remaining).toBe(0);
        expect(got.map((r) => (r.data.payload as { name: string }).name)).toEqual(names);
        const releaseAt = Date.parse(block.reset_at) + 1000;
        for (const r of got) {
          // Not a speed check: the hold must not end before the upstream's window does (+1 s).
          // 5 ms is the resolution of this poll's clock reading, never a tolerance on svcd.
          expect((arrivals.get(r.id as string) ?? Date.now()) + 5).toBeGreaterThanOrEqual(releaseAt);
        }
        const s = await node.status();
        const t = s.throttles.at(-1);
        expect(t?.held).toBeGreaterThanOrEqual(3);
        expect(t?.resumed_at).not.toBeNull();
        expect(Date.parse(t?.until as string)).toBe(releaseAt);
        break;
      }
    } finally {
      clearInterval(poll);
      await consumer.close();
    }
  }, 120_000);
});
