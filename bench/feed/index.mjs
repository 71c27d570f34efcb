// bench/feed: one tower process (SQLite), 1 000 and 5 000 concurrent SSE subscribers, publish
// rate ramped; delivered events/s, p50/p99 publish→receive latency, tower RSS per idle
// subscriber. socket.io 4 runs side by side in the same harness with the same message size.
// Publishing on the tower is POST /nodes/events (a durable write through the event log);
// on socket.io it is an emit to the server, which broadcasts with io.emit.
// BENCH_FEED_PEERS=svc,svc-ws,socket.io adds the tower read over /events/ws.
// BENCH_FEED_BASE=DIR (a checkout of another commit, built) adds peer svc-base: that tower, so
// a change is compared with its base in the same run (BENCH_FEED_PEERS=svc,svc-base,socket.io).
// While each step's events are delivered, POST /approvals goes to the tower at
// BENCH_FEED_PROBE_RATE requests/s (20; 0: off) and its p50/p99 are reported beside the
// delivery figures (probe.mjs): what fan-out leaves of the tower for requests.
// The same feed on two replicas behind HAProxy, at 10 000 subscribers: bench/feed-fleet.
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os, { tmpdir } from 'node:os';
import { join } from 'node:path';
import { io } from 'socket.io-client';
import { countChecks } from '../lib/counts.mjs';
import { machine, median, met, ROOT, today, writeSection } from '../lib/report.mjs';
import {
  checkStep as checkCounts,
  clientsFor,
  cpuMs,
  delivered,
  now,
  PAD,
  publishAt as publishFor,
  rssKiB,
  sleep,
  towerPublisher,
} from './harness.mjs';
import { probeDomain, probeFigures, startPostProbe } from './probe.mjs';

const SIZES = (process.env.BENCH_FEED_SUBS ?? '1000,5000').split(',').map(Number);
/**
 * The ramp, as deliveries per second the subscribers ask of the server (publish rate x
 * subscribers): 1 000 subscribers get 50, 200 and 400 events/s; 5 000 get 10, 40 and 80.
 * BENCH_FEED_RATES sets publish rates directly instead.
 */
const LOAD = (process.env.BENCH_FEED_LOAD ?? '50000,200000,400000').split(',').map(Number);
const ratesFor = (n) =>
  process.env.BENCH_FEED_RATES
    ? process.env.BENCH_FEED_RATES.split(',').map(Number)
    : LOAD.map((l) => Math.max(1, Math.round(l / n)));
/** Peers alternate within each round, so load from elsewhere on the machine hits both alike. */
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const SECONDS = Number(process.env.BENCH_DURATION ?? 5);
/** Seconds of publishing at the first rate after connecting, before the measured steps. */
const WARMUP = Number(process.env.BENCH_FEED_WARMUP ?? 2);
const PEERS = (process.env.BENCH_FEED_PEERS ?? 'svc,socket.io').split(',');
/** POST /approvals per second while a step's events are delivered (svc peers; 0: none). */
const PROBE_RATE = Number(process.env.BENCH_FEED_PROBE_RATE ?? 20);
const HERE = join(ROOT, 'bench/feed');
/** Seconds after the last publish that delivery may take and still count as keeping up. */
const TAIL_S = 1;
/** Every event published reached every subscriber exactly once, or no figures are written. */
const checks = countChecks('feed');

/** The same envelope the tower sends, so both peers move messages of one size. */
function envelope(payload, id) {
  return {
    id: String(id),
    ts: new Date().toISOString(),
    type: 'progress',
    domain_id: null,
    mission_id: null,
    agent_id: 'bench',
    status: null,
    payload: { ...payload, node_id: 'nod_01KAR8M0Q2Z6X9V3J5T7W1Y4B6' },
    rate_limit: { limit: 10000000, remaining: 9999999, reset_at: new Date().toISOString() },
  };
}
const MESSAGE_BYTES = JSON.stringify(envelope({ seq: 1234, t: now(), pad: PAD }, 123456)).length;

function startServer(args, env = {}) {
  const child = spawn(process.execPath, args, {
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  return new Promise((resolve, reject) => {
    let out = '';
    child.stdout.on('data', (d) => {
      out += d;
      const m = /listening on (\S+)/.exec(out);
      if (m) resolve({ child, url: m[1] });
    });
    child.once('exit', (code) => reject(new Error(`server exited ${code}`)));
  });
}

async function stopServer(child) {
  const exited = new Promise((r) => child.once('exit', r));
  child.kill('SIGTERM');
  await Promise.race([exited, sleep(5000)]);
  child.kill('SIGKILL');
}

/** The peer under test: start it, publish batches of events, stop it. */
async function peer(name) {
  // svc-ws: the same tower, read over /events/ws; svc-base: the tower of BENCH_FEED_BASE.
  if (name === 'svc' || name === 'svc-ws' || name === 'svc-base') {
    const root = name === 'svc-base' ? (process.env.BENCH_FEED_BASE ?? ROOT) : ROOT;
    const home = mkdtempSync(join(tmpdir(), 'svc-bench-feed-'));
    // Rate limits on (every event carries the rate_limit block), set high enough not to bite.
    const srv = await startServer(
      [
        // BENCH_FEED_PROF=DIR writes a CPU profile of the tower there.
        ...(process.env.BENCH_FEED_PROF
          ? ['--cpu-prof', `--cpu-prof-dir=${process.env.BENCH_FEED_PROF}`]
          : []),
        join(root, 'dist/cli/svc.js'),
        'tower',
        'serve',
        '--listen',
        '127.0.0.1:0',
        '--rate-limit',
        '10000000/1m',
        '--log-level',
        'warn',
      ],
      { SVC_HOME: home },
    );
    const admin = readFileSync(join(home, 'tower', 'admin.token'), 'utf8').trim();
    const reg = await fetch(`${srv.url}/nodes`, {
      method: 'POST',
      headers: { authorization: `Bearer ${admin}`, 'content-type': 'application/json' },
      body: JSON.stringify({ hostname: 'bench-publisher' }),
    });
    const { jwt } = await reg.json();
    const probeDomainId = PROBE_RATE > 0 ? await probeDomain(srv.url, admin) : null;
    const publisher = towerPublisher({ url: srv.url, jwt });
    return {
      url: srv.url,
      token: admin,
      pid: srv.child.pid,
      probe: () =>
        probeDomainId === null
          ? null
          : startPostProbe({ url: srv.url, token: admin, domainId: probeDomainId, rate: PROBE_RATE }),
      publish: (batch) => publisher.publish(batch),
      settle: () => publisher.settle(),
      async stop() {
        publisher.close();
        await stopServer(srv.child);
        rmSync(home, { recursive: true, force: true });
      },
    };
  }
  const srv = await startServer([join(HERE, 'socketio-server.mjs')]);
  const pub = io(srv.url, { transports: ['websocket'], auth: { role: 'publisher' } });
  await new Promise((r) => pub.once('connect', r));
  let id = 0;
  return {
    url: srv.url,
    token: '',
    pid: srv.child.pid,
    probe: () => null,
    publish(batch) {
      pub.emit(
        'publish',
        batch.map((payload) => envelope(payload, ++id)),
      );
    },
    async settle() {
      return 0;
    },
    async stop() {
      pub.close();
      await stopServer(srv.child);
    },
  };
}

/** Publishes at `rate` events/s for `seconds` (a step: SECONDS). */
const publishAt = (p, rate, seconds = SECONDS) => publishFor(p, rate, seconds);
const checkStep = (what, counts, each, n) => checkCounts(checks, what, counts, each, n);

async function measure(name, n) {
  const p = await peer(name);
  await sleep(1000);
  const rssBefore = rssKiB(p.pid);
  const c = clientsFor(name, p.url, p.token, n);
  const t0 = now();
  await c.ask('connect');
  const connectS = (now() - t0) / 1000;
  await sleep(3000);
  const rssIdle = rssKiB(p.pid);
  // Warm-up, not measured: both servers (and the subscribers) run their delivery path a while
  // at the first rate before anything is measured, so no row pays for first-run compilation.
  // The counts of each step (the warm-up's too) are checked as they stand when the next step
  // resets them, so an event delivered after the step's wait ended is counted (a duplicate
  // shows as one too many).
  let step = null;
  if (WARMUP > 0) {
    const { sent } = await publishAt(p, ratesFor(n)[0], WARMUP);
    const failed = await p.settle();
    checks.exact(`${name} ${n} subscribers, warm-up: publish failures`, failed, 0);
    await delivered(c, (sent - failed) * n);
    step = { what: `${name} ${n} subscribers, warm-up`, each: sent - failed };
  }
  const rows = [];
  for (const rate of ratesFor(n)) {
    const before = await c.ask('reset');
    if (step) checkStep(step.what, before, step.each, n);
    const cpu0 = [cpuMs(p.pid), cpuMs(c.child.pid)];
    const probe = p.probe();
    const { sent, start, end } = await publishAt(p, rate);
    const failed = await p.settle();
    checks.exact(`${name} ${n} subscribers x ${rate} events/s: publish failures`, failed, 0);
    const s = await delivered(c, (sent - failed) * n);
    const post = probe ? await probe.stop() : null;
    if (post) {
      checks.exact(
        `${name} ${n} subscribers x ${rate} events/s: POST /approvals answered 201`,
        post.created,
        post.sent,
      );
      checks.that(
        Object.keys(post.failures).length === 0,
        `${name} ${n} subscribers x ${rate} events/s: POST /approvals failed: ${JSON.stringify(post.failures)}`,
      );
    }
    const postFig = post
      ? probeFigures(post.ms)
      : { n: 0, p50: Number.NaN, p99: Number.NaN, max: Number.NaN };
    step = { what: `${name} ${n} subscribers x ${rate} events/s`, each: sent - failed };
    // The offered rate (rate x n) times the share of the offered events delivered, so peers
    // that both deliver everything tie whatever their last event's latency or the publisher's
    // timing (a step may publish one event fewer for one peer); a peer whose last delivery
    // came more than TAIL_S after the last publish fell behind and is scaled down by
    // window / (window + how much later), i.e. about delivered / (time it took - TAIL_S).
    const behind = Math.max(0, s.lastAt - end - TAIL_S * 1000);
    const perSec =
      sent > 0 ? ((s.delivered / (sent * n)) * rate * n * (end - start)) / (end - start + behind) : 0;
    const wall = (now() - start) / 1000;
    const cpu = [cpuMs(p.pid) - cpu0[0], cpuMs(c.child.pid) - cpu0[1]];
    rows.push({
      peer: name,
      n,
      rate,
      sent,
      failed,
      delivered: s.delivered,
      expected: sent * n,
      perSec: Math.round(perSec),
      p50: s.p50,
      p99: s.p99,
      lagP99: s.lagP99,
      // Share of one core over the step, and the server's CPU per delivered event.
      serverCpu: (100 * cpu[0]) / 1000 / wall,
      clientCpu: (100 * cpu[1]) / 1000 / wall,
      serverUsPerDelivery: s.delivered ? (cpu[0] * 1000) / s.delivered : Number.NaN,
      posts: postFig.n,
      postP50: postFig.p50,
      postP99: postFig.p99,
    });
    console.log(JSON.stringify(rows.at(-1)));
  }
  if (step) checkStep(step.what, await c.ask('stats'), step.each, n);
  const exited = new Promise((r) => c.child.once('exit', r));
  c.child.send({ cmd: 'close' });
  await exited;
  await p.stop();
  const mem = { peer: name, n, rssBefore, rssIdle, perSubKiB: (rssIdle - rssBefore) / n, connectS };
  console.log(JSON.stringify(mem));
  return { rows, mem };
}

/**
 * BENCH_FEED_FROM_LOG=FILE re-renders the section from the JSON lines an earlier run printed
 * (each measurement: its rate rows, then its memory line) instead of measuring again.
 */
function runsFromLog(file) {
  const out = [];
  let rows = [];
  for (const line of readFileSync(file, 'utf8').split('\n')) {
    if (!line.startsWith('{"peer"')) continue;
    const x = JSON.parse(line);
    if ('rssIdle' in x) {
      out.push({ rows, mem: x });
      rows = [];
    } else rows.push(x);
  }
  return out;
}

let load = [os.loadavg()[0]];
const runs = [];
if (process.env.BENCH_FEED_FROM_LOG) {
  runs.push(...runsFromLog(process.env.BENCH_FEED_FROM_LOG));
  // A log holds each step's totals only (the per-subscriber checks ran when it was made).
  for (const x of runs.flatMap((r) => r.rows)) {
    checks.exact(
      `${x.peer} ${x.n} subscribers x ${x.rate} events/s (log): deliveries`,
      x.delivered,
      x.expected,
    );
    checks.exact(`${x.peer} ${x.n} subscribers x ${x.rate} events/s (log): publish failures`, x.failed, 0);
  }
  // Logs of several runs may be joined: the load range covers them all.
  const loads = readFileSync(process.env.BENCH_FEED_FROM_LOG, 'utf8')
    .split('\n')
    .filter((l) => l.startsWith('{"load"'))
    .flatMap((l) => JSON.parse(l).load);
  load = loads.length ? [Math.min(...loads), Math.max(...loads)] : [Number.NaN, Number.NaN];
} else {
  for (let round = 0; round < ROUNDS; round++) {
    for (const n of SIZES) for (const name of PEERS) runs.push(await measure(name, n));
  }
  load.push(os.loadavg()[0]);
  console.log(JSON.stringify({ load }));
}

/** Median of each figure over the rounds, per peer and size (and rate). */
const results = [];
for (const n of SIZES) {
  for (const name of PEERS) {
    const mine = runs.filter((r) => r.mem.peer === name && r.mem.n === n);
    const med = (xs) => median(xs.filter(Number.isFinite));
    const rows = ratesFor(n).map((rate) => {
      const at = mine.map((r) => r.rows.find((x) => x.rate === rate));
      return {
        peer: name,
        n,
        rate,
        sent: med(at.map((x) => x.sent)),
        failed: at.reduce((a, x) => a + x.failed, 0),
        delivered: med(at.map((x) => x.delivered)),
        expected: med(at.map((x) => x.expected)),
        perSec: Math.round(med(at.map((x) => x.perSec))),
        p50: med(at.map((x) => x.p50)),
        p99: med(at.map((x) => x.p99)),
        lagP99: med(at.map((x) => x.lagP99 ?? Number.NaN)),
        serverCpu: med(at.map((x) => x.serverCpu ?? Number.NaN)),
        clientCpu: med(at.map((x) => x.clientCpu ?? Number.NaN)),
        serverUsPerDelivery: med(at.map((x) => x.serverUsPerDelivery ?? Number.NaN)),
        postP50: med(at.map((x) => x.postP50 ?? Number.NaN)),
        postP99: med(at.map((x) => x.postP99 ?? Number.NaN)),
      };
    });
    const mem = {
      peer: name,
      n,
      rssBefore: med(mine.map((r) => r.mem.rssBefore)),
      rssIdle: med(mine.map((r) => r.mem.rssIdle)),
      perSubKiB: med(mine.map((r) => r.mem.perSubKiB)),
      connectS: med(mine.map((r) => r.mem.connectS)),
    };
    results.push({ rows, mem });
  }
}

const roundsText = SIZES.map((n) => {
  const k = runs.filter((r) => r.mem.peer === 'svc' && r.mem.n === n).length;
  return `${k} round${k === 1 ? '' : 's'} at ${n} subscribers`;
}).join(' and ');
const fmt = (x) => (Number.isFinite(x) ? x.toFixed(1) : 'n/a');
const probed = PROBE_RATE > 0;
const table = [
  `| peer | subscribers | publish rate (events/s) | delivered / expected | delivered events/s | p50 ms | p99 ms |${probed ? ' POST /approvals p50 / p99 ms |' : ''} subscribers’ loop lag p99 ms | server CPU % | subscribers CPU % | server CPU µs per delivery |`,
  `|---|---:|---:|---:|---:|---:|---:|${probed ? '---:|' : ''}---:|---:|---:|---:|`,
  ...results.flatMap((r) =>
    r.rows.map(
      (x) =>
        `| ${x.peer} | ${x.n} | ${x.rate} | ${x.delivered} / ${x.expected}${x.failed ? ` (${x.failed} publish failures)` : ''} | ${x.perSec} | ${fmt(x.p50)} | ${fmt(x.p99)} |${probed ? ` ${Number.isFinite(x.postP50) ? `${fmt(x.postP50)} / ${fmt(x.postP99)}` : 'n/a'} |` : ''} ${fmt(x.lagP99)} | ${fmt(x.serverCpu)} | ${fmt(x.clientCpu)} | ${fmt(x.serverUsPerDelivery)} |`,
    ),
  ),
];
const memTable = [
  '| peer | subscribers | connect all (s) | server RSS before (MiB) | RSS with all idle (MiB) | per idle subscriber (KiB) |',
  '|---|---:|---:|---:|---:|---:|',
  ...results.map(
    ({ mem: m }) =>
      `| ${m.peer} | ${m.n} | ${m.connectS.toFixed(1)} | ${(m.rssBefore / 1024).toFixed(1)} | ${(m.rssIdle / 1024).toFixed(1)} | ${m.perSubKiB.toFixed(1)} |`,
  ),
];
// The issue's targets, checked against this run.
const row = (peer, n, rate) =>
  results.flatMap((r) => r.rows).find((x) => x.peer === peer && x.n === n && x.rate === rate);
const mem = (peer, n) => results.find((r) => r.mem.peer === peer && r.mem.n === n)?.mem;
const targets = [];
/** The summary table's rows (BENCHMARKS.md's top): one per target. */
const summary = [];
const sio = () => (PEERS.includes('socket.io') ? 'socket.io 4' : '–');
const at200 = row('svc', 1000, 200);
if (at200) {
  summary.push({
    peer: sio(),
    target: 'p99 < 50 ms at 1 000 subscribers x 200 events/s',
    result: `${fmt(at200.p99)} ms (socket.io ${fmt(row('socket.io', 1000, 200)?.p99)} ms)`,
    met: met(at200.p99 < 50),
  });
  targets.push(
    `- p99 under 50 ms at 1 000 subscribers x 200 events/s: ${at200.p99 < 50 ? 'met' : 'not met'} (${fmt(at200.p99)} ms; socket.io ${fmt(row('socket.io', 1000, 200)?.p99)} ms).`,
  );
  // What that load asks of the machine, from the CPU per delivery, against what it got.
  const deliveries = 1000 * 200;
  const serverCores = (at200.serverUsPerDelivery * deliveries) / 1e6;
  const clientCores = (serverCores * at200.clientCpu) / at200.serverCpu;
  targets.push(
    `  It asks ${serverCores.toFixed(2)} of a core of the tower and ${clientCores.toFixed(2)} of the subscribers' process (${(at200.serverUsPerDelivery).toFixed(1)} µs of tower CPU per delivery x ${deliveries} deliveries/s), ${(serverCores + clientCores).toFixed(2)} of the 2 cores; in this run the two got ${((at200.serverCpu + at200.clientCpu) / 100).toFixed(2)} of a core together, so deliveries queued and latency measured that backlog.`,
  );
}
const idle = SIZES.map((n) => mem('svc', n)).filter(Boolean);
if (idle.length) {
  summary.push({
    peer: sio(),
    target: '< 20 KiB RSS per idle subscriber',
    result: SIZES.map(
      (n) =>
        `${fmt(mem('svc', n)?.perSubKiB)} KiB at ${n} (socket.io ${fmt(mem('socket.io', n)?.perSubKiB)})`,
    ).join(', '),
    met: met(idle.every((m) => m.perSubKiB < 20)),
  });
  targets.push(
    `- under 20 KiB RSS per idle subscriber: ${idle.every((m) => m.perSubKiB < 20) ? 'met' : 'not met'} (${idle.map((m) => `${m.perSubKiB.toFixed(1)} KiB at ${m.n}`).join(', ')}).`,
  );
}
const pairs = results
  .flatMap((r) => r.rows)
  .filter((x) => x.peer === 'svc')
  .map((x) => [x, row('socket.io', x.n, x.rate)])
  .filter(([, y]) => y);
if (pairs.length) {
  const worse = pairs.filter(([x, y]) => x.perSec < y.perSec);
  const ratios = pairs.map(([x, y]) => x.perSec / y.perSec);
  summary.push({
    peer: sio(),
    target: "delivered events/s ≥ socket.io's, every event delivered exactly once",
    result: `svc / socket.io ${Math.min(...ratios).toFixed(2)}–${Math.max(...ratios).toFixed(2)}x over ${pairs.length} rows; counts checked`,
    met: met(worse.length === 0),
  });
  targets.push(
    `- delivered throughput at least socket.io's: ${worse.length === 0 ? 'met' : `met in ${pairs.length - worse.length} of ${pairs.length} rows`} (svc / socket.io: ${pairs.map(([x, y]) => `${(x.perSec / y.perSec).toFixed(2)}`).join(', ')}, in table order).`,
  );
}

checks.orExit();
writeSection(
  'feed',
  `## feed (${today()})

\`npm run bench -- feed\` on ${machine()}. One tower process (SQLite, rate limits on so every
event carries its \`rate_limit\` block), subscribers in a second process on the same machine
(the sampled ones \`node:http\` SSE readers for svc, \`socket.io-client\` for socket.io), each rate held for
${SECONDS} s after a ${WARMUP} s warm-up at the first rate that is not counted; figures are medians of ${roundsText}, the peers alternating within each
round. The machine is shared: the 1-minute load average was between ${Math.min(...load).toFixed(1)} and ${Math.max(...load).toFixed(1)}, so absolute figures move between runs; compare the peers within one run. socket.io 4 as BENCHMARKING.md recommends: websocket transport only,
\`perMessageDeflate: false\`, \`io.emit\` per event. Both move the same envelope (${MESSAGE_BYTES} bytes of
JSON per event). Publish on svc is \`POST /nodes/events\` (a committed write through the event
log, then the hub's fan-out; \`node:http\` on a keep-alive agent, which costs the publishing
process a fraction of what \`fetch\` does); on socket.io an emit to the server. Latency is publisher
timestamp (taken in the bench process before the publish is sent) → subscriber receive,
sampled on 100 subscribers spread evenly over the connection order (every n/100-th: both
servers write to their streams in about that order, so the first ones would see only the
start of each fan-out), full clients that parse every event. The others, for both peers alike,
only count events: each reads its raw TCP socket into one buffer all of them share (net's
\`onread\`: no allocation, stream or HTTP/WebSocket client per read) and counts SSE events
(their \`id:\` lines) or socket.io event packets (WebSocket frame headers parsed in place,
engine.io open and ping answered) in the bytes of that read, never past its end (the rest of
the shared buffer is another socket's). Counts are checked, or nothing is written: each
subscriber got each published event exactly once (its count equals the events published, and
the sampled ones saw no event twice), for every step and the warm-up, and no publish failed. The subscribers' process shares the 2 cores with the
server, and an event that arrives while it is busy or in a GC pause waits in its socket, which
counts as latency: with full HTTP clients as counters it used as much CPU as the tower and
its major GCs paused it for tens of ms several times a second. Its own event-loop lag (timer
delay, p99 over the step) is reported beside the latency, so what is left of the harness in
the latency shows. Delivered events/s is the offered rate (publish rate x subscribers) times
the share of the offered events that were delivered, so two peers that both deliver everything
tie, whatever their last event's latency; a peer whose last delivery came more than ${TAIL_S} s
after the last publish fell behind, and its figure is scaled by publish window / (publish
window + that delay beyond ${TAIL_S} s), about what it delivered over the time it took; the same rule
for both peers. CPU % is the share of one core each
process used over the step (user + system time from /proc), and server CPU µs per delivery
is the server's CPU time over the events it delivered: unlike latency, load from other
processes does not inflate it much, so it is the figure to compare when the machine is busy.
Server RSS per idle subscriber is (RSS with all connected and idle − RSS before) /
subscribers, fresh server per size.${
    probed
      ? ` While each step's events are delivered, the bench also posts \`POST /approvals\` (a
pending approval: one row and its feed event, which the subscribers' filter leaves out) to the
tower at ${PROBE_RATE} requests/s on a keep-alive agent, each timed from just before it is sent to the
end of its answer, every one answered 201 (checked): what fan-out leaves of the tower for
requests (socket.io has no such route: n/a).`
      : ''
  }

${table.join('\n')}

${memTable.join('\n')}

Targets (issue 4), this run:

${targets.join('\n')}

Latency only means something when the server and the subscribers get the CPU they ask for.
Both peers fall behind once they share what the other processes on this machine leave of its
2 cores: latency then measures the backlog, not the server (compare the CPU % columns with
100 % of a core, and the load average above). svc spends its CPU on one write per stream per
read of the log (one HTTP chunk straight to the socket, the same Buffer for every stream that
gets the same events), so it costs less CPU per delivered event than socket.io (one write per
event per socket) and moves more events per second as the load grows. The price is a wait:
the tower reads the log at once after a quiet spell, and under a stream of events spaces its
reads by 1.5 times the CPU time the last pass took (at least 10 ms, at most 100 ms), so at
1 000 subscribers an event's latency is mostly that wait plus one pass of 1 000 socket writes
(each a few µs of kernel time on this machine).
`,
  summary,
);
