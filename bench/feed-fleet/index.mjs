// bench/feed-fleet: the feed at fleet scale (issue 33). Two tower replicas (real
// `svc tower serve` processes from dist/, one PostgreSQL schema) behind a real HAProxy
// (test/support/haproxy.ts, round-robin), 10 000 SSE subscribers connected through HAProxy (so
// spread over both replicas), events published through HAProxy at 100 events/s (so each
// replica commits about half and hears of the other half by NOTIFY). Figures: every event
// delivered once to every subscriber (counted exactly by bench/feed's counting readers),
// publish→receive p50/p99, and POST /approvals p50/p99 through HAProxy while the events are
// delivered (bench/feed/probe.mjs). Target: p99 < 250 ms.
//
// The full-size run, one command (needs a quiet machine: 10 000 streams, 1 000 000 deliveries
// a second on 2 cores):
//   npm run build && npm run bench -- feed-fleet
// A trial that checks it works and its counts hold, without touching BENCHMARKS.md:
//   BENCH_REPORT=/tmp/b.md BENCH_FEED_FLEET_SUBS=1000 BENCH_DURATION=5 node bench/feed-fleet/index.mjs
//
// Options (environment): BENCH_FEED_FLEET_SUBS (10000), BENCH_FEED_FLEET_RATE (events/s, 100),
// BENCH_DURATION (seconds of the measured step, 10), BENCH_FEED_WARMUP (seconds, 2),
// BENCH_FEED_PROBE_RATE (POST /approvals per second, 20), BENCH_ROUNDS (1, per HAProxy mode),
// BENCH_FEED_FLEET_LB_MODES (how HAProxy balances, each measured: http,tcp),
// BENCH_FEED_PROF=DIR (CPU profiles of the replicas there), BENCH_FEED_FLEET_BALANCERS (HAProxy
// processes; one per 8 000 subscribers), BENCH_FEED_FLEET_DIRECT=1 (the subscribers straight on
// the replicas: HAProxy's share of the latency), SVC_TEST_PG_URL.
import { randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os, { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startHaproxy } from '../../test/support/haproxy.ts';
import {
  checkStep,
  cpuMs,
  delivered,
  now,
  publishAt,
  rssKiB,
  sleep,
  splitClientsFor,
  towerPublisher,
} from '../feed/harness.mjs';
import { probeDomain, probeFigures, startPostProbe } from '../feed/probe.mjs';
import { countChecks } from '../lib/counts.mjs';
import { sql, startReplica } from '../lib/replica.mjs';
import { machine, median, met, today, writeSection } from '../lib/report.mjs';

const N = Number(process.env.BENCH_FEED_FLEET_SUBS ?? 10_000);
const RATE = Number(process.env.BENCH_FEED_FLEET_RATE ?? 100);
const SECONDS = Number(process.env.BENCH_DURATION ?? 10);
const WARMUP = Number(process.env.BENCH_FEED_WARMUP ?? 2);
const PROBE_RATE = Number(process.env.BENCH_FEED_PROBE_RATE ?? 20);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 1);
// How HAProxy balances (test/support/haproxy.ts): http reads every request and response, tcp
// passes connections through; each mode is measured in its own rounds of the same run.
const LB_MODES = (process.env.BENCH_FEED_FLEET_LB_MODES ?? 'http,tcp').split(',').filter(Boolean);
const TARGET_P99_MS = 250;
/** HAProxy processes the subscribers spread over: one holds at most ~9 000 streams here. */
const BALANCERS = Math.max(1, Number(process.env.BENCH_FEED_FLEET_BALANCERS ?? Math.ceil(N / 8000)));
const checks = countChecks('feed-fleet');
const loadNow = () =>
  os
    .loadavg()
    .map((l) => l.toFixed(1))
    .join(' / ');

/** Replica `i` of a round on `schema`, its CPU profile in BENCH_FEED_PROF when set. */
function replica({ dir, i, schema, masterKey, procs }) {
  const nodeArgs = process.env.BENCH_FEED_PROF
    ? ['--cpu-prof', `--cpu-prof-dir=${process.env.BENCH_FEED_PROF}`, `--cpu-prof-name=r${i}.cpuprofile`]
    : [];
  return startReplica({ home: join(dir, `r${i}`), schema, masterKey, procs, nodeArgs });
}

/** Values of the named series on the replica at `url` (its /metrics; each must be there). */
async function metricValues(url, token, names) {
  const res = await fetch(`${url}/metrics`, { headers: { authorization: `Bearer ${token}` } });
  const text = await res.text();
  return names.map((name) => {
    const m = new RegExp(`^${name} (\\S+)`, 'm').exec(text);
    if (res.status !== 200 || !m) throw new Error(`GET ${url}/metrics: ${res.status}, no ${name}`);
    return Number(m[1]);
  });
}

/** The feed streams open on the replica at `url` (its svc_feed_streams gauge). */
async function feedStreams(url, token) {
  return (await metricValues(url, token, ['svc_feed_streams']))[0];
}

/** Live fan-out so far on the replica at `url`: pages read and writes to streams. */
async function fanOut(url, token) {
  const [pages, writes] = await metricValues(url, token, [
    'svc_feed_fanout_pages_total',
    'svc_feed_fanout_writes_total',
  ]);
  return { pages, writes };
}

/** The whole machine's busy CPU time so far, in core-seconds (/proc/stat: all but idle and iowait). */
function machineBusyS() {
  const f = readFileSync('/proc/stat', 'utf8').split('\n')[0].trim().split(/\s+/).slice(1).map(Number);
  const total = f.reduce((a, b) => a + b, 0);
  return (total - (f[3] ?? 0) - (f[4] ?? 0)) / 100;
}

async function post(url, token, path, body) {
  const res = await fetch(url + path, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  const json = await res.json();
  if (res.status !== 201) throw new Error(`POST ${path}: ${res.status} ${JSON.stringify(json)}`);
  return json;
}

/** One round: fresh replicas, schema and HAProxy; the subscribers connect, then one step. */
async function round(k, mode) {
  const dir = mkdtempSync(join(tmpdir(), 'svc-bench-feed-fleet-'));
  const schema = `bench_feed_fleet_${process.pid}_${randomBytes(3).toString('hex')}`;
  const masterKey = randomBytes(32).toString('hex');
  const procs = [];
  let lb = null;
  const lbs = [];
  let clients = null;
  let publisher = null;
  await sql(`create schema "${schema}"`);
  try {
    // One after the other: the first migrates the schema and writes the admin token.
    const towers = [await replica({ dir, i: 0, schema, masterKey, procs })];
    towers.push(await replica({ dir, i: 1, schema, masterKey, procs }));
    const admin = readFileSync(join(towers[0].home, 'tower', 'admin.token'), 'utf8').trim();
    // HAProxy holds two descriptors per stream, and a process may hold at most the hard limit
    // of open files (20 000 on these machines): past that many streams, BALANCERS HAProxy
    // processes (each round-robin over both replicas), the subscribers taking them in turn.
    for (let b = 0; b < BALANCERS; b++) {
      const lbDir = join(dir, `lb${b}`);
      mkdirSync(lbDir);
      lbs.push(
        await startHaproxy({
          dir: lbDir,
          backends: towers.map((t) => t.url),
          maxConn: Math.ceil(N / BALANCERS) + 2000,
          mode,
        }),
      );
    }
    lb = lbs[0];
    console.log(
      `feed-fleet round ${k}: replicas ${towers.map((t) => t.url).join(', ')} behind ${lbs.map((l) => l.url).join(', ')}`,
    );
    const { jwt } = await post(lb.url, admin, '/nodes', { hostname: 'bench-publisher' });
    const probeDomainId = PROBE_RATE > 0 ? await probeDomain(lb.url, admin) : null;
    // Up to 32 requests at once: each is a PostgreSQL transaction of a few round trips, and a
    // request waiting for a socket in this process would count as feed latency.
    publisher = towerPublisher({ url: lb.url, jwt, sockets: 32 });

    const rssBefore = towers.map((t) => rssKiB(t.child.pid));
    // BENCH_FEED_FLEET_DIRECT=1: the subscribers straight on the replicas, in turn (what
    // HAProxy costs the latency, for docs/perf-notes.md; not the benchmark's own figure).
    const targets = process.env.BENCH_FEED_FLEET_DIRECT === '1' ? towers : lbs;
    clients = splitClientsFor('svc', targets.map((t) => t.url).join(','), admin, N);
    const t0 = now();
    await clients.ask('connect');
    const connectS = (now() - t0) / 1000;
    // Where the streams are, as each replica counts them (its /metrics), whichever way they
    // came (HAProxy, or straight with BENCH_FEED_FLEET_DIRECT).
    const spread = await Promise.all(towers.map(async (t, i) => `r${i} ${await feedStreams(t.url, admin)}`));
    await sleep(2000);
    const rssIdle = towers.map((t) => rssKiB(t.child.pid));
    console.log(`feed-fleet round ${k}: ${N} subscribers in ${connectS.toFixed(1)} s (${spread.join(', ')})`);

    let step = null;
    if (WARMUP > 0) {
      const { sent } = await publishAt(publisher, RATE, WARMUP);
      const failed = await publisher.settle();
      checks.exact(`round ${k} warm-up: publish failures`, failed, 0);
      await delivered(clients, (sent - failed) * N);
      step = { what: `round ${k} warm-up`, each: sent - failed };
    }
    const before = await clients.ask('reset');
    if (step) checkStep(checks, step.what, before, step.each, N);
    const pids = [
      ...towers.map((t) => t.child.pid),
      ...lbs.map((l) => l.child.pid),
      ...clients.children.map((c) => c.pid),
    ];
    const cpu0 = pids.map(cpuMs);
    const fan0 = await Promise.all(towers.map((t) => fanOut(t.url, admin)));
    const busy0 = machineBusyS();
    const probe =
      probeDomainId === null
        ? null
        : startPostProbe({ url: lb.url, token: admin, domainId: probeDomainId, rate: PROBE_RATE });
    publisher.answeredMs.length = 0;
    const { sent, start } = await publishAt(publisher, RATE, SECONDS);
    const failed = await publisher.settle();
    const publishFig = probeFigures(publisher.answeredMs);
    checks.exact(`round ${k}: publish failures`, failed, 0);
    const s = await delivered(clients, (sent - failed) * N);
    const posted = probe ? await probe.stop() : null;
    const wall = (now() - start) / 1000;
    const cpu = pids.map((pid, i) => (100 * (cpuMs(pid) - (cpu0[i] ?? 0))) / 1000 / wall);
    const busyS = machineBusyS() - busy0;
    const fan = (await Promise.all(towers.map((t) => fanOut(t.url, admin)))).map((f, i) => ({
      pages: f.pages - (fan0[i]?.pages ?? 0),
      writes: f.writes - (fan0[i]?.writes ?? 0),
    }));
    const writes = fan.reduce((a, f) => a + f.writes, 0);
    checkStep(checks, `round ${k}`, await clients.ask('stats'), sent - failed, N);
    if (posted) {
      checks.exact(`round ${k}: POST /approvals answered 201`, posted.created, posted.sent);
      checks.that(
        Object.keys(posted.failures).length === 0,
        `round ${k}: POST /approvals failed: ${JSON.stringify(posted.failures)}`,
      );
    }
    const postFig = posted ? probeFigures(posted.ms) : { n: 0, p50: Number.NaN, p99: Number.NaN };
    const r = {
      round: k,
      n: N,
      rate: RATE,
      sent,
      delivered: s.delivered,
      expected: sent * N,
      min: s.min,
      max: s.max,
      p50: s.p50,
      p99: s.p99,
      sampled: s.sampled,
      lagP99: s.lagP99,
      countingLagP99: s.countingLagP99,
      publishP50: publishFig.p50,
      publishP99: publishFig.p99,
      posts: postFig.n,
      postP50: postFig.p50,
      postP99: postFig.p99,
      connectS,
      spread,
      rssPerSubKiB: (rssIdle.reduce((a, b) => a + b, 0) - rssBefore.reduce((a, b) => a + b, 0)) / N,
      // Each replica's passes a second, the writes to streams a second (both), and what the
      // whole machine spent per write: every process and the kernel's loopback work.
      pagesPerS: fan.map((f) => f.pages / wall),
      writesPerS: writes / wall,
      machineBusyPct: (100 * busyS) / wall / os.cpus().length,
      machineUsPerWrite: writes > 0 ? (busyS * 1e6) / writes : Number.NaN,
      cpu: {
        r0: cpu[0],
        r1: cpu[1],
        haproxy: cpu.slice(2, 2 + BALANCERS).reduce((a, b) => a + b, 0),
        subscribers: cpu.slice(2 + BALANCERS).reduce((a, b) => a + b, 0),
      },
    };
    console.log(JSON.stringify(r));
    return r;
  } finally {
    if (clients) {
      const exited = clients.children.map((c) => new Promise((r) => c.once('exit', r)));
      await clients.ask('close');
      await Promise.all(exited);
    }
    publisher?.close();
    for (const l of lbs) await l.stop();
    for (const p of procs) {
      if (p.child.exitCode !== null || p.child.signalCode !== null) continue;
      const exited = new Promise((r) => p.child.once('exit', r));
      // SIGTERM: a replica writing a CPU profile writes it on a clean exit only.
      p.child.kill('SIGTERM');
      await Promise.race([exited, sleep(10_000)]);
      p.child.kill('SIGKILL');
    }
    await sql(`drop schema if exists "${schema}" cascade`).catch(() => {});
    rmSync(dir, { recursive: true, force: true });
  }
}

const loadAtStart = loadNow();
const runs = [];
for (const mode of LB_MODES) for (let k = 0; k < ROUNDS; k++) runs.push({ ...(await round(k, mode)), mode });
checks.orExit();

const med = (f, mode) =>
  median(
    runs
      .filter((r) => r.mode === mode)
      .map(f)
      .filter(Number.isFinite),
  );
const fmt = (x) => (Number.isFinite(x) ? x.toFixed(1) : 'n/a');
const byMode = LB_MODES.map((mode) => ({
  mode,
  p99: med((r) => r.p99, mode),
  postP99: med((r) => r.postP99, mode),
  postP50: med((r) => r.postP50, mode),
  usPerWrite: med((r) => r.machineUsPerWrite, mode),
}));
// What the machine allows: writes a second its cores can make at the measured cost of one,
// against what pages every 100 ms to every stream would take.
const ceiling = byMode
  .map(
    (m) =>
      `${modeName(m.mode)}: ${fmt(m.usPerWrite)} µs a write, at most ${Math.round((os.cpus().length * 1e6) / m.usPerWrite)} writes/s`,
  )
  .join('; ');
const modeName = (m) => (m === 'tcp' ? 'HAProxy mode tcp' : 'HAProxy mode http');
const table = [
  '| HAProxy | round | subscribers (per replica) | events/s | delivered / expected | p50 ms | p99 ms | publish answered p50 / p99 ms | POST /approvals p50 / p99 ms | subscribers’ loop lag p99 ms, sampled / counting | CPU % r0 / r1 / HAProxy / subscribers | fan-out pages/s r0 / r1 | stream writes/s | machine busy %, µs per write |',
  '|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---|---|---:|---|',
  ...runs.map(
    (r) =>
      `| ${r.mode} | ${r.round + 1} | ${r.n} (${r.spread.join(', ')}) | ${r.rate} | ${r.delivered} / ${r.expected} | ${fmt(r.p50)} | ${fmt(r.p99)} | ${fmt(r.publishP50)} / ${fmt(r.publishP99)} | ${fmt(r.postP50)} / ${fmt(r.postP99)} (${r.posts}) | ${fmt(r.lagP99)} / ${fmt(r.countingLagP99)} | ${[r.cpu.r0, r.cpu.r1, r.cpu.haproxy, r.cpu.subscribers].map((x) => x.toFixed(0)).join(' / ')} | ${r.pagesPerS.map((x) => x.toFixed(1)).join(' / ')} | ${r.writesPerS.toFixed(0)} | ${r.machineBusyPct.toFixed(0)} %, ${fmt(r.machineUsPerWrite)} |`,
  ),
];
const scaled = N !== 10_000 || RATE !== 100;
writeSection(
  'feed-fleet',
  `## feed at fleet scale: SSE subscribers on two replicas behind HAProxy (${today()})

\`npm run bench -- feed-fleet\` (bench/feed-fleet) on ${machine()}; load average ${loadAtStart} at
the start, ${loadNow()} at the end${scaled ? ` (**scaled down**: ${N} subscribers x ${RATE} events/s; the target is for 10 000 x 100)` : ''}.
Two tower replicas (\`svc tower serve\` from dist/, one PostgreSQL schema, rate limits off)
behind HAProxy (round-robin, \`test/support/haproxy.ts\`${BALANCERS > 1 ? `; ${BALANCERS} HAProxy processes, each over both replicas, the subscribers taking them in turn: one process holds two descriptors per stream and may hold at most 20 000 here` : ''}), all on this machine with the
subscribers' two processes. ${N} SSE subscribers (\`/events/stream?type=progress\`) connect through
HAProxy, which spreads them over the replicas (the column says how). Events are published
through HAProxy too (\`POST /nodes/events\`, node:http keep-alive), so each replica commits
about half of them and hears of the rest from the other replica's sequencer (NOTIFY); ${RATE}
events/s for ${SECONDS} s after a ${WARMUP} s warm-up that is not counted. The subscribers are
bench/feed's: 100 sampled ones, spread over the connection order, parse every event and give
the publish→receive latency (from the publisher's clock before the POST: publish answered is
the POST's own time, to the commit); the others count events in the raw bytes of their socket.
The sampled ones run in a process of their own, connecting wave by wave with the counting
ones' process so that they stay spread over the connection order: their timing then waits
for nobody's counting (both processes' loop lag is in the table). Counts
are checked, or nothing is written: each subscriber got each event exactly once (its count
equals the events published, and no sampled one saw an event twice). While the events are
delivered, \`POST /approvals\` goes through HAProxy at ${PROBE_RATE} requests/s, timed from just
before it is sent to the end of its answer, each answered 201 (checked): the replicas'
latency for requests while their streams are written. CPU % is the share of one core each
process used over the step: on a loaded machine the replicas get less than they ask for and
latency measures that wait (compare the CPU % with the load average). Fan-out pages are each
replica's pages of new events handed to its streams a second, stream writes the pages handed
to one stream each (both from the replicas' /metrics: \`svc_feed_fanout_*_total\`), and the
machine's busy share (/proc/stat, all ${os.cpus().length} cores) over the step divided by those writes is what one
write cost the whole machine: the replica's write, HAProxy's read and write, the
subscriber's read and the kernel's loopback work between them. ${ROUNDS} round${ROUNDS === 1 ? '' : 's'} per
HAProxy mode (${LB_MODES.join(', ')}), each with fresh replicas and HAProxy: \`http\` reads every
request and response and balances each request; \`tcp\` balances connections and passes their
bytes through (docs/operations.md, "Replicas behind a load balancer").

${table.join('\n')}

Target (issue 33): p99 publish→receive under ${TARGET_P99_MS} ms at 10 000 subscribers x 100
events/s: ${byMode
    .map(
      (m) =>
        `${modeName(m.mode)} ${scaled ? 'not judged (scaled-down run)' : m.p99 < TARGET_P99_MS ? 'met' : 'not met'} (${fmt(m.p99)} ms${ROUNDS > 1 ? ', median of the rounds' : ''}; POST /approvals p99 during the run ${fmt(m.postP99)} ms)`,
    )
    .join('; ')}.
What this machine allows (${ceiling}): a page every 100 ms to each of ${N} streams would be
${N * 10} writes/s (docs/perf-notes.md, "what one feed write costs the machine").
`,
  byMode.flatMap((m) => [
    {
      peer: modeName(m.mode),
      target: `p99 < ${TARGET_P99_MS} ms, 10 000 SSE subscribers on 2 replicas x 100 events/s, every event once`,
      result: `${fmt(m.p99)} ms at ${N} x ${RATE}${scaled ? ' (scaled down)' : ''}; counts checked`,
      met: met(scaled ? null : m.p99 < TARGET_P99_MS),
    },
    {
      peer: modeName(m.mode),
      target: 'request latency bounded while streams are written (POST /approvals p99)',
      result: `${fmt(m.postP99)} ms (p50 ${fmt(m.postP50)} ms) at ${N} x ${RATE}`,
      met: met(null),
    },
  ]),
);
