// bench/fleet: a simulated fleet (sim.mjs: N node control channels speaking the control
// protocol) on 2 tower replicas (real `svc tower serve` processes from dist/, one PostgreSQL
// schema) behind a real HAProxy (test/support/haproxy.ts, round-robin). For N = 1 000 and
// 5 000 nodes, side by side: connect time (all N dialled at once), tower RSS per node
// channel, task created → claimed p50/p99 with all N connected (and claim calls per task),
// node request and attach echo through the replica holding the node's channel against the
// other replica, and at the largest N a kill -9 of one replica under a stream of tasks: time
// until every node is back, tasks lost, tasks completed twice.
//
// Options (environment): BENCH_FLEET_SIZES (1000,5000), BENCH_FLEET_WORKERS (nodes with an
// agent that claims, 100), BENCH_FLEET_TASKS (tasks for the claim latency, 100),
// BENCH_FLEET_SAMPLES (nodes asked per replica for requests and attach, 300: a p99 of 100 is
// the second slowest),
// BENCH_FLEET_ECHOES (echoes per attach stream, 10), BENCH_FLEET_KILL_TASKS (200),
// BENCH_FLEET_NODE_ARGS (flags for the replicas' node, e.g. --max-semi-space-size=8),
// BENCH_FLEET_LOGS (a directory for each replica's output, e.g. with --trace-gc),
// BENCH_FLEET_SETTLE_S (seconds RSS is watched after the connects, 30).
import { randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os, { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import WebSocket from 'ws';
import { startHaproxy } from '../../test/support/haproxy.ts';
import { countChecks } from '../lib/counts.mjs';
import { sql, startReplica } from '../lib/replica.mjs';
import { machine, met, percentile, today, writeSection } from '../lib/report.mjs';
import { createFleet } from './sim.mjs';

const SIZES = (process.env.BENCH_FLEET_SIZES ?? '1000,5000').split(',').map(Number);
const WORKERS = Number(process.env.BENCH_FLEET_WORKERS ?? 100);
const TASKS = Number(process.env.BENCH_FLEET_TASKS ?? 100);
const SAMPLES = Number(process.env.BENCH_FLEET_SAMPLES ?? 300);
/** Requests and attach streams in flight at once in the loaded step. */
const CONCURRENCY = 8;
/** Seconds RSS is watched after the connects (every 5 s). */
const SETTLE_S = Number(process.env.BENCH_FLEET_SETTLE_S ?? 30);
const ECHOES = Number(process.env.BENCH_FLEET_ECHOES ?? 10);
const KILL_TASKS = Number(process.env.BENCH_FLEET_KILL_TASKS ?? 200);
const NODE_ARGS = (process.env.BENCH_FLEET_NODE_ARGS ?? '').split(' ').filter(Boolean);
const MAX_N = Math.max(...SIZES);
const checks = countChecks('fleet');
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const loadNow = () =>
  os
    .loadavg()
    .map((l) => l.toFixed(1))
    .join(' / ');
const LOAD_AT_START = loadNow();
const procs = [];
/** Each size's directory and schema (dropped as it ends, and at exit). */
const rounds = [];

function startTower(round, i, masterKey) {
  return startReplica({
    home: join(round.dir, `r${i}`),
    schema: round.schema,
    masterKey,
    procs,
    nodeArgs: NODE_ARGS,
  });
}

async function until(what, fn, timeoutMs = 120_000) {
  const deadline = performance.now() + timeoutMs;
  for (;;) {
    const v = await fn().catch((e) => {
      if (/exited/.test(e.message)) throw e;
      return null;
    });
    if (v) return v;
    if (performance.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(50);
  }
}

async function call(base, token, method, path, body) {
  for (let attempt = 0; ; attempt++) {
    try {
      return await callOnce(base, token, method, path, body);
    } catch (e) {
      // HAProxy's 503 (no replica up) forwarded nothing, so even a POST is safe to repeat; a
      // kept-alive connection closed under a request is repeated where that is harmless
      // (reads, and registering a node or an agent: a spare one changes no figure).
      const harmless = method === 'GET' || path === '/nodes' || path === '/agents';
      const balancer503 = /^HTTP 503 from the balancer/.test(e.message);
      if (attempt >= 20 || !(balancer503 || (harmless && e.message === 'fetch failed'))) throw e;
      await sleep(250);
    }
  }
}

async function callOnce(base, token, method, path, body) {
  const res = await fetch(base + path, {
    method,
    headers: {
      authorization: `Bearer ${token}`,
      ...(body === undefined ? {} : { 'content-type': 'application/json' }),
    },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  const text = await res.text();
  // HAProxy's own 502/503 page (a replica died mid-request, none up yet) is not the tower's.
  if (!/json/.test(res.headers.get('content-type') ?? '') && text) {
    throw new Error(`HTTP ${res.status} from the balancer`);
  }
  return { status: res.status, body: text ? JSON.parse(text) : null };
}

/** Runs fn over items with `width` at once. */
async function pool(items, width, fn) {
  let next = 0;
  await Promise.all(
    Array.from({ length: width }, async () => {
      while (next < items.length) {
        const i = next++;
        await fn(items[i], i);
      }
    }),
  );
}

function rssKiB(pid) {
  const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return Number(m?.[1] ?? Number.NaN);
}

const stats = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return { n: s.length, p50: percentile(s, 50), p99: percentile(s, 99) };
};
const ms = (x) => (Number.isFinite(x) ? `${x < 10 ? x.toFixed(1) : Math.round(x)} ms` : '–');

/** Which replica (r0, r1) holds each connected node's channel, from HAProxy's sessions. */
async function holders(lb, fleet) {
  const byPort = fleet.localPorts();
  const out = new Map();
  for (const line of (await lb.admin('show sess')).split('\n')) {
    const m = /src=[^ ]*:(\d+) .*?srv=(r\d+)/.exec(line);
    const sim = m && byPort.get(Number(m[1]));
    if (sim) out.set(sim.id, Number(m[2].slice(1)));
  }
  return out;
}

/** One node request (GET /nodes/{id}/status) straight to a replica: its latency and status. */
async function nodeRequest(base, admin, nodeId) {
  const t0 = performance.now();
  const r = await call(base, admin, 'GET', `/nodes/${nodeId}/status`);
  return { ms: performance.now() - t0, status: r.status, code: r.body?.code };
}

/** An attach stream straight to a replica, then ECHOES byte round trips through the node. */
async function attachEcho(base, admin, nodeId) {
  const url = `${base.replace(/^http/, 'ws')}/api/attach-ws?node=${nodeId}&agent=sim-shell&cols=80&rows=24`;
  const ws = new WebSocket(url, { headers: { authorization: `Bearer ${admin}` }, perMessageDeflate: false });
  const echoes = [];
  let error = null;
  try {
    await new Promise((resolve, reject) => {
      ws.once('open', resolve);
      ws.once('error', reject);
    });
    for (let i = 0; i < ECHOES && !error; i++) {
      const payload = Buffer.from(`echo ${i} ${randomBytes(8).toString('hex')}\n`);
      const t0 = performance.now();
      await new Promise((resolve) => {
        const onMsg = (data, isBinary) => {
          if (!isBinary) {
            error = JSON.parse(String(data)).code ?? 'error';
            done();
          } else if (Buffer.compare(Buffer.from(data), payload) === 0) {
            echoes.push(performance.now() - t0);
            done();
          }
        };
        const onClose = () => {
          error ??= 'closed';
          done();
        };
        const done = () => {
          ws.off('message', onMsg);
          ws.off('close', onClose);
          resolve();
        };
        ws.on('message', onMsg);
        ws.on('close', onClose);
        ws.send(payload, { binary: true });
      });
    }
  } catch (e) {
    error = e.message;
  } finally {
    ws.terminate();
  }
  return { echoes, error };
}

/** Submits a first_claim task through the balancer; retried on a network error without doubling it. */
async function submit(lb, admin, missionId, title, extra = {}) {
  for (let attempt = 0; ; attempt++) {
    try {
      const r = await call(lb.url, admin, 'POST', `/work/missions/${missionId}/tasks`, {
        title,
        description: 'fleet',
        claim_policy: 'first_claim',
        priority: 0,
        ...extra,
      });
      if (r.status === 201) return r.body.id;
      throw new Error(`submit: ${r.status} ${JSON.stringify(r.body)}`);
    } catch (e) {
      if (attempt >= 10 || /^submit:/.test(e.message)) throw e;
      // The POST may have committed before its replica died, and its commit may become
      // visible only after this error reaches us (PostgreSQL finishes a COMMIT it received,
      // WAL flush included, before it notices the client is gone): once, a task looked for
      // at once was not there yet and was created twice. So look for its title for a while
      // before creating it again.
      const found = await lookFor(lb, admin, missionId, title, 2000);
      console.log(`fleet: submit ${title}: ${e.message}; ${found ? 'it was created' : 'not created: again'}`);
      if (found) return found.id;
    }
  }
}

/** The mission's task titled `title`, looked for until it appears or `ms` have passed. */
async function lookFor(lb, admin, missionId, title, ms) {
  const deadline = performance.now() + ms;
  for (;;) {
    const found = (await listTasks(lb, admin, missionId).catch(() => [])).find((t) => t.title === title);
    if (found || performance.now() > deadline) return found;
    await sleep(250);
  }
}

async function listTasks(lb, admin, missionId) {
  const all = [];
  let cursor = null;
  do {
    const q = `?limit=500${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`;
    const r = await call(lb.url, admin, 'GET', `/work/missions/${missionId}/tasks${q}`);
    if (r.status !== 200) throw new Error(`list: ${r.status}`);
    all.push(...r.body.items);
    cursor = r.body.next_cursor;
  } while (cursor);
  return all;
}

/** Cross-replica figures for one connected fleet: node requests and attach echoes. */
async function crossReplica(lb, towers, admin, fleet) {
  const where = await holders(lb, fleet);
  checks.exact('nodes whose holding replica HAProxy names', where.size, fleet.sims.length);
  const sample = [...where].slice(0, SAMPLES);
  const out = {
    same: { req: [], attach: [] },
    other: { req: [], attach: [] },
    alone: { same: [], other: [] },
  };
  // One at a time first: what a request costs with the fleet connected and nothing else
  // asked of the machine; then CONCURRENCY at a time, where the 2 cores run out (the
  // replicas, PostgreSQL, the simulator and this process share them) and requests queue.
  for (const [nodeId, r] of sample) {
    out.alone.same.push(await nodeRequest(towers[r].url, admin, nodeId));
    out.alone.other.push(await nodeRequest(towers[1 - r].url, admin, nodeId));
  }
  // Each replica's own view of the step: its event loop's delay (prom-client resets it at
  // every scrape, so the second scrape covers the step) and its GC pauses.
  const before = await Promise.all(towers.map((t) => loopAndGc(t.url, admin)));
  await pool(sample, CONCURRENCY, async ([nodeId, r]) => {
    out.same.req.push(await nodeRequest(towers[r].url, admin, nodeId));
    out.other.req.push(await nodeRequest(towers[1 - r].url, admin, nodeId));
  });
  await pool(sample.slice(0, Math.max(1, Math.floor(SAMPLES / 4))), CONCURRENCY, async ([nodeId, r]) => {
    out.same.attach.push(await attachEcho(towers[r].url, admin, nodeId));
    out.other.attach.push(await attachEcho(towers[1 - r].url, admin, nodeId));
  });
  const after = await Promise.all(towers.map((t) => loopAndGc(t.url, admin)));
  out.replicas = after.map((a, i) => ({
    lagP99: a.lagP99,
    lagMax: a.lagMax,
    gcCount: a.gcCount - before[i].gcCount,
    gcMs: a.gcMs - before[i].gcMs,
  }));
  for (const k of ['same', 'other']) {
    checks.exact(`${k}-replica node requests answered`, out[k].req.length, sample.length);
    checks.exact(`${k}-replica node requests answered, one at a time`, out.alone[k].length, sample.length);
  }
  return out;
}

/**
 * A replica's event-loop delay p99 and max since its last scrape (ms), and its GC pauses so
 * far (count, total ms), from its /metrics (prom-client's default metrics).
 */
async function loopAndGc(url, admin) {
  const res = await fetch(`${url}/metrics`, { headers: { authorization: `Bearer ${admin}` } });
  const text = await res.text();
  if (res.status !== 200) throw new Error(`GET ${url}/metrics: ${res.status} ${text.slice(0, 200)}`);
  const one = (name) => Number(new RegExp(`^${name} (\\S+)`, 'm').exec(text)?.[1] ?? Number.NaN);
  const sum = (name) =>
    [...text.matchAll(new RegExp(`^${name}\\{[^}]*\\} (\\S+)`, 'gm'))].reduce((a, m) => a + Number(m[1]), 0);
  return {
    lagP99: one('svc_tower_nodejs_eventloop_lag_p99_seconds') * 1000,
    lagMax: one('svc_tower_nodejs_eventloop_lag_max_seconds') * 1000,
    gcCount: sum('svc_tower_nodejs_gc_duration_seconds_count'),
    gcMs: sum('svc_tower_nodejs_gc_duration_seconds_sum') * 1000,
  };
}

function describeReq(list) {
  const ok = list.filter((x) => x.status === 200);
  const s = stats(ok.map((x) => x.ms));
  const codes = {};
  for (const x of list)
    if (x.status !== 200) codes[`${x.status} ${x.code}`] = (codes[`${x.status} ${x.code}`] ?? 0) + 1;
  const bad = Object.entries(codes).map(([c, n]) => `${n} × ${c}`);
  return { ok: ok.length, of: list.length, ...s, bad: bad.join(', ') || 'none' };
}

function describeAttach(list) {
  const ok = list.filter((x) => x.error === null && x.echoes.length === ECHOES);
  const s = stats(ok.flatMap((x) => x.echoes));
  const codes = {};
  for (const x of list) if (x.error !== null) codes[x.error] = (codes[x.error] ?? 0) + 1;
  const bad = Object.entries(codes).map(([c, n]) => `${n} × ${c}`);
  return { ok: ok.length, of: list.length, ...s, bad: bad.join(', ') || 'none' };
}

async function main() {
  const results = [];
  for (const N of SIZES) results.push(await size(N));
  checks.orExit();
  write(results);
}

/**
 * One size, on its own: fresh replicas, schema and HAProxy, N nodes registered, then their
 * channels. A size run after another on the same replicas would carry the heap the earlier
 * one grew and left (a 1 000-node round before the 5 000 one added 24-36 MiB to each replica).
 */
async function size(N) {
  const round = {
    dir: mkdtempSync(join(tmpdir(), 'svc-bench-fleet-')),
    schema: `bench_fleet_${process.pid}_${randomBytes(3).toString('hex')}`,
  };
  rounds.push(round);
  const mine = procs.length;
  const masterKey = randomBytes(32).toString('hex');
  await sql(`create schema "${round.schema}"`);
  const towers = [await startTower(round, 0, masterKey)];
  towers.push(await startTower(round, 1, masterKey));
  const admin = readFileSync(join(towers[0].home, 'tower', 'admin.token'), 'utf8').trim();
  const lb = await startHaproxy({ dir: round.dir, backends: towers.map((t) => t.url) });
  procs.push({ child: lb.child });
  console.log(`fleet: replicas ${towers.map((t) => t.url).join(', ')} behind ${lb.url}`);

  const domain = (await call(lb.url, admin, 'POST', '/domains', { name: 'fleet' })).body.id;
  const mission = (await call(lb.url, admin, 'POST', `/domains/${domain}/m`, { name: 'claims' })).body.id;
  const killMission = (await call(lb.url, admin, 'POST', `/domains/${domain}/m`, { name: 'kill' })).body.id;
  let currentMission = mission;

  console.log(`fleet: N=${N}: registering ${N} nodes, ${WORKERS} with an agent`);
  const nodes = Array.from({ length: N }, (_, i) => ({ i }));
  await pool(nodes, 16, async (n) => {
    const r = await call(lb.url, admin, 'POST', '/nodes', { hostname: `sim-${n.i}` });
    if (r.status !== 201) throw new Error(`register: ${r.status} ${JSON.stringify(r.body)}`);
    n.id = r.body.id;
    n.jwt = r.body.jwt;
    if (n.i < WORKERS) {
      const a = await call(lb.url, n.jwt, 'POST', '/agents', { domain_id: domain, runtime: 'beta_cli' });
      if (a.status !== 201) throw new Error(`enrol: ${a.status} ${JSON.stringify(a.body)}`);
      n.agentId = a.body.id;
    }
  });

  // Against the replicas with every node registered and no channel yet.
  await sleep(2000); // let the replicas settle
  const rssBefore = towers.map((t) => rssKiB(t.child.pid));
  const last = N === MAX_N;
  console.log(`fleet: N=${N}: connecting`);
  // Workers are spread over the fleet's first nodes; the rest only hold a channel.
  const fleet = createFleet({ url: lb.url, nodes: nodes.slice(0, N), missionId: () => currentMission });
  const t0 = performance.now();
  fleet.connectAll();
  const progress = setInterval(() => {
    const st = fleet.stats;
    console.log(
      `fleet: N=${N} ${fleet.connected()} connected, ${st.failedAttempts} failed attempts, ${st.refused503} × 503`,
    );
  }, 5000);
  await fleet
    .until(`${N} nodes connected`, () => fleet.connected() === N, 900_000)
    .finally(() => clearInterval(progress));
  const connectMs = Math.max(...fleet.sims.map((s) => s.welcomedAt)) - t0;
  const failedAttempts = fleet.stats.failedAttempts;
  checks.exact(`N=${N}: welcomes on first connection`, fleet.stats.welcomes, N + 0);
  await sleep(2000);
  const rssAfter = towers.map((t) => rssKiB(t.child.pid));
  const perChannelKiB = (rssAfter.reduce((a, b) => a + b, 0) - rssBefore.reduce((a, b) => a + b, 0)) / N;
  // And over the next SETTLE_S seconds, idle but for the workers' polls and the heartbeats:
  // what the heap grows to between collections counts as much as what the channels hold.
  let perChannelPeakKiB = perChannelKiB;
  for (let t = 5; t <= SETTLE_S; t += 5) {
    await sleep(5000);
    const rss = towers.map((x) => rssKiB(x.child.pid));
    const kib = (rss.reduce((a, b) => a + b, 0) - rssBefore.reduce((a, b) => a + b, 0)) / N;
    perChannelPeakKiB = Math.max(perChannelPeakKiB, kib);
    console.log(`fleet: N=${N} +${t} s: RSS per channel ${kib.toFixed(1)} KiB`);
  }

  // task created → claimed, one task at a time, with all N connected.
  currentMission = mission;
  const latencies = [];
  const claimed = [];
  const pollCallsBefore = fleet.stats.pollClaimCalls;
  for (let k = 0; k < TASKS; k++) {
    const t = performance.now();
    const id = await submit(lb, admin, mission, `claim-${N}-${k}`);
    await until(`task ${id} claimed`, async () => fleet.stats.claimedAt.has(id), 60_000);
    latencies.push(fleet.stats.claimedAt.get(id) - t);
    claimed.push(id);
  }
  await until('claimed tasks completed', async () => claimed.every((id) => fleet.stats.completions.has(id)));
  for (const id of claimed) checks.exact(`task ${id} completions`, fleet.stats.completions.get(id), 1);
  const attempts = claimed.map((id) => fleet.stats.claimCallsByTask.get(id) ?? 0);
  const pollCalls = fleet.stats.pollClaimCalls - pollCallsBefore;

  const cross = await crossReplica(lb, towers, admin, fleet);
  const r = {
    N,
    connectMs,
    failedAttempts,
    refused503: fleet.stats.refused503,
    perChannelKiB,
    perChannelPeakKiB,
    rssAfter,
    claim: stats(latencies),
    attempts: { ...stats(attempts), mean: attempts.reduce((a, b) => a + b, 0) / attempts.length },
    pollCalls,
    sameReq: describeReq(cross.same.req),
    otherReq: describeReq(cross.other.req),
    sameAlone: describeReq(cross.alone.same),
    otherAlone: describeReq(cross.alone.other),
    sameAttach: describeAttach(cross.same.attach),
    otherAttach: describeAttach(cross.other.attach),
    replicas: cross.replicas,
  };
  console.log(JSON.stringify(r));

  if (last) r.kill = await killRun(lb, towers, admin, fleet, killMission, (m) => (currentMission = m));
  await fleet.close();
  await endRound(round, procs.splice(mine), N);
  return r;
}

/** Stops a round's processes (keeping their output with BENCH_FLEET_LOGS) and drops its schema. */
async function endRound(round, list, tag) {
  const k = rounds.indexOf(round);
  if (k >= 0) rounds.splice(k, 1);
  // BENCH_FLEET_LOGS=DIR keeps what each replica printed (with --trace-gc in
  // BENCH_FLEET_NODE_ARGS, every collection and its pause).
  if (process.env.BENCH_FLEET_LOGS) {
    mkdirSync(process.env.BENCH_FLEET_LOGS, { recursive: true });
    list.forEach((p, i) => {
      if (p.output) writeFileSync(join(process.env.BENCH_FLEET_LOGS, `N${tag}-replica-${i}.log`), p.output());
    });
  }
  for (const p of list) if (p.child.exitCode === null && p.child.signalCode === null) p.child.kill('SIGKILL');
  await sleep(200);
  await sql(`drop schema if exists "${round.schema}" cascade`).catch(() => {});
  rmSync(round.dir, { recursive: true, force: true });
}

/** kill -9 one replica while tasks stream in; everything must come back and complete once. */
async function killRun(lb, towers, admin, fleet, killMission, setMission) {
  setMission(killMission);
  const N = fleet.sims.length;
  const ids = [];
  const submitting = (async () => {
    for (let k = 0; k < KILL_TASKS; k++) {
      ids.push(await submit(lb, admin, killMission, `kill-${k}`, { lease_seconds: 5 }));
      await sleep(20);
    }
  })();
  await until('a quarter of the tasks submitted', async () => ids.length >= KILL_TASKS / 4);
  const welcomesBefore = fleet.stats.welcomes;
  // The channels r0 holds are the ones that must come back through r1.
  const dropped = [...(await holders(lb, fleet)).values()].filter((r) => r === 0).length;
  const victim = towers[0];
  const killedAt = performance.now();
  victim.child.kill('SIGKILL');
  await fleet.until(
    'every node of the killed replica back',
    () => fleet.stats.welcomes - welcomesBefore >= dropped && fleet.connected() === N,
    120_000,
  );
  const backMs = Math.max(...fleet.sims.map((s) => s.welcomedAt)) - killedAt;
  checks.exact('re-connections after the kill', fleet.stats.welcomes - welcomesBefore, dropped);
  await submitting;
  // Tasks whose claim or completion died with the replica come back when their lease expires.
  const deadline = performance.now() + 120_000;
  let tasks = [];
  for (;;) {
    tasks = await listTasks(lb, admin, killMission);
    if (tasks.every((t) => t.state === 'completed') || performance.now() > deadline) break;
    await sleep(500);
  }
  checks.exact('kill-run tasks submitted (distinct)', new Set(ids).size, KILL_TASKS);
  checks.exact('kill-run tasks in the mission', tasks.length, KILL_TASKS);
  const lost = tasks.filter((t) => t.state !== 'completed').length;
  const doubled = ids.filter((id) => (fleet.stats.completions.get(id) ?? 0) > 1).length;
  return { dropped, backMs, lost, doubled, completeErrors: fleet.stats.completeErrors };
}

function write(results) {
  const big = results.at(-1);
  const row = (label, f) => `| ${label} | ${results.map(f).join(' | ')} |`;
  const req = (x) =>
    `${ms(x.p50)} / ${ms(x.p99)} (${x.ok} of ${x.of} ok${x.bad === 'none' ? '' : `; ${x.bad}`})`;
  const kill = big.kill;
  const md = `## Fleet: many nodes on two replicas behind HAProxy (${today()})

Method: \`npm run bench -- fleet\` (bench/fleet). Two tower replicas (\`svc tower serve\` from
dist/, one PostgreSQL schema, rate limits off) behind HAProxy ${'2.6'} (round-robin, WebSockets
passed through, \`/readyz\` checks every 500 ms, \`option redispatch\`), all on this machine. The
simulator (bench/fleet/sim.mjs, one process) opens one control channel per node through
HAProxy and speaks the control protocol as svcd does (hello, agent_status, node.response,
attach dial-back echoing bytes, claim and complete over \`/mcp/call\` on task_ready and a 2 s
poll), decoding every message with svcd's schemas, reconnecting with svcd's backoff.
${WORKERS} of the nodes have an agent in the tasks' domain. Connect: all N dialled at once,
until the last welcome. Each size runs on its own: fresh replicas, schema and HAProxy, its N
nodes registered through HAProxy, then their channels. RSS per channel: the replicas' RSS 2 s
after the last welcome minus their RSS with the nodes registered and no channel yet, over N,
then every 5 s for ${SETTLE_S} s more (the highest shown): it counts the heap's garbage and
headroom as well as what the channels hold (\`node bench/fleet/channel-heap.mjs\` splits the
two), and V8's young generation, which grows to 3 x 16 MiB per replica under any steady load:
a fixed cost that dominates the figure at small N. Claim: one \`first_claim\` task at a time, from the POST to the claim answer that
carries it; claim calls per task: every \`claim_mesh_task\` call its task_ready caused (each
woken worker's, again when it was already claiming, and the claimer's next call, which finds
the queue empty), besides the poll's calls of those seconds, counted apart. Requests and attach: ${SAMPLES} nodes (attach: a quarter of them, ${ECHOES}
echoes each), asked straight at the replica holding the node's channel (HAProxy's sessions say
which) and at the other one: requests first one at a time, then ${CONCURRENCY} at a time (which
keeps the 2 cores busy: requests queue for them), attach ${CONCURRENCY} at a time. The replicas'
event-loop delay (p99 and max, 10 ms resolution) and GC pauses over those steps are read from
their /metrics. Kill: at N = ${big.N}, ${KILL_TASKS} tasks (lease 5 s) submitted
through HAProxy one per 20 ms; after a quarter, replica r0 gets SIGKILL.

Machine: ${machine()}; load average ${LOAD_AT_START} at the start of the run, ${loadNow()} at
its end (the machine is shared: other work's load shows in every figure here).

| | ${results.map((r) => `N = ${r.N}`).join(' | ')} |
| --- | ${results.map(() => '---').join(' | ')} |
${row('connect, all N at once', (r) => `${ms(r.connectMs)} (${r.failedAttempts} failed attempts, ${r.refused503} × 503)`)}
${row('tower RSS per node channel', (r) => `${r.perChannelKiB.toFixed(1)} KiB (replicas ${r.rssAfter.map((k) => `${Math.round(k / 1024)} MiB`).join(' + ')}); at most ${r.perChannelPeakKiB.toFixed(1)} KiB over the next ${SETTLE_S} s`)}
${row('task created → claimed, p50 / p99', (r) => `${ms(r.claim.p50)} / ${ms(r.claim.p99)} (${r.claim.n} tasks)`)}
${row('claim calls per task, p50 / p99 (mean)', (r) => `${r.attempts.p50} / ${r.attempts.p99} (${r.attempts.mean.toFixed(1)}; and ${r.pollCalls} poll calls in all)`)}
${row('node request one at a time, same replica, p50 / p99', (r) => req(r.sameAlone))}
${row('node request one at a time, other replica, p50 / p99', (r) => req(r.otherAlone))}
${row(`node request ${CONCURRENCY} at a time, same replica, p50 / p99`, (r) => req(r.sameReq))}
${row(`node request ${CONCURRENCY} at a time, other replica, p50 / p99`, (r) => req(r.otherReq))}
${row('attach echo, same replica, p50 / p99', (r) => req(r.sameAttach))}
${row('attach echo, other replica, p50 / p99', (r) => req(r.otherAttach))}
${row('replicas during requests and attach: loop delay p99 / max; GC pauses', (r) => r.replicas.map((x) => `${ms(x.lagP99)} / ${ms(x.lagMax)}; ${x.gcCount} in ${ms(x.gcMs)}`).join(' · '))}

Kill -9 of one replica at N = ${big.N}: ${kill.dropped} channels dropped, every node back
${ms(kill.backMs)} after the kill; tasks lost ${kill.lost} of ${KILL_TASKS}, completed twice
${kill.doubled}.

The node's attach dial-back goes through HAProxy too, so it reaches either replica; one that
is not waiting for the stream hands it on (nodes/forward.ts). A scaled-down run (sizes, workers,
samples) says so in the Method line above; the figures before requests and streams crossed
replicas are in docs/perf-notes.md.
`;
  const otherOk = (x) => x.ok === x.of && x.p99 < 50;
  writeSection('fleet', md, [
    {
      peer: '–',
      target: `${big.N} nodes on 2 replicas, < 20 KiB tower memory per channel`,
      result: `${big.N} connected in ${ms(big.connectMs)}, ${big.perChannelKiB.toFixed(1)} KiB per channel (at most ${big.perChannelPeakKiB.toFixed(1)} over the next ${SETTLE_S} s)`,
      met: met(Math.max(big.perChannelKiB, big.perChannelPeakKiB) < 20),
    },
    {
      peer: 'same replica',
      target: 'node request through the other replica p99 < 50 ms',
      result: `one at a time ${req(big.otherAlone)} (same replica ${ms(big.sameAlone.p99)}); ${CONCURRENCY} at a time ${ms(big.otherReq.p50)} / ${ms(big.otherReq.p99)} (same replica ${ms(big.sameReq.p99)})`,
      met: met(otherOk(big.otherAlone)),
    },
    {
      peer: 'same replica',
      target: 'attach echo through the other replica works',
      result: `${req(big.otherAttach)} (same replica: ${big.sameAttach.ok} of ${big.sameAttach.of})`,
      met: met(big.otherAttach.ok === big.otherAttach.of),
    },
    {
      peer: '–',
      target: 'kill -9 a replica: every node back < 30 s, 0 tasks lost, 0 doubled',
      result: `back in ${ms(kill.backMs)}, ${kill.lost} lost, ${kill.doubled} doubled`,
      met: met(kill.backMs < 30_000 && kill.lost === 0 && kill.doubled === 0),
    },
  ]);
}

async function cleanup() {
  const left = procs.splice(0);
  for (const round of rounds.splice(0)) await endRound(round, left.splice(0), 'left');
}

main().then(
  async () => {
    await cleanup();
    process.exit(0);
  },
  async (e) => {
    console.error(e);
    for (const p of procs) if (p.output) console.error(p.output().slice(-2000));
    await cleanup();
    process.exit(1);
  },
);
