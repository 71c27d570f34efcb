// bench/http: authenticated GET /domains/{id} and POST of a regular task through the tower,
// on SQLite and PostgreSQL, against a bare Fastify route doing the same single query.
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os, { tmpdir } from 'node:os';
import { join } from 'node:path';
import autocannon from 'autocannon';
import pg from 'pg';
import { machine, median, ROOT, today, writeSection } from '../lib/report.mjs';

const DURATION = Number(process.env.BENCH_DURATION ?? 5);
/** Tower and bare runs alternate, so load from elsewhere on the machine hits both alike. */
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const CONNECTIONS = 32;
/** Requests sent to each target before measuring. */
const WARMUP = Number(process.env.BENCH_HTTP_WARMUP ?? 5000);
const PG_URL = process.env.SVC_TEST_PG_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';

function start(args, env = {}) {
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
    child.once('exit', (code) => reject(new Error(`exited ${code}`)));
  });
}

/** CPU time (user + system) a process has used, in ms. */
function cpuMs(pid) {
  const f = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
  return ((Number(f[11]) + Number(f[12])) * 1000) / 100; // clock ticks of 10 ms
}

/**
 * One run; `pid` is the server's. Besides req/s it records the server's CPU per request,
 * which the other load on this shared machine does not change (it only takes CPU away).
 */
async function cannon(opts, pid) {
  const c0 = pid ? cpuMs(pid) : 0;
  const r = await autocannon({ connections: CONNECTIONS, duration: DURATION, ...opts });
  const cpuUs = pid && r.requests.total ? ((cpuMs(pid) - c0) * 1000) / r.requests.total : Number.NaN;
  return { rps: Math.round(r.requests.average), p99: r.latency.p99, errors: r.errors + r.non2xx, cpuUs };
}

/** Median req/s and p99 over the rounds of one target. */
function summarize(runs) {
  return {
    rps: Math.round(median(runs.map((r) => r.rps))),
    p99: median(runs.map((r) => r.p99)),
    errors: runs.reduce((n, r) => n + r.errors, 0),
    cpuUs: median(runs.map((r) => r.cpuUs)),
  };
}

async function measureStore(store) {
  const home = mkdtempSync(join(tmpdir(), 'svc-bench-'));
  let schema = null;
  const towerArgs = [
    join(ROOT, 'dist/cli/svc.js'),
    'tower',
    'serve',
    '--listen',
    '127.0.0.1:0',
    '--rate-limit',
    '0',
    '--log-level',
    'warn',
  ];
  let bareTarget = join(home, 'bare.db');
  if (store === 'postgres') {
    schema = `bench_${process.pid}`;
    const c = new pg.Client({ connectionString: PG_URL });
    await c.connect();
    await c.query(
      `drop schema if exists ${schema} cascade; create schema ${schema}; drop schema if exists ${schema}_bare cascade; create schema ${schema}_bare`,
    );
    await c.end();
    towerArgs.push('--database', `${PG_URL}?schema=${schema}`);
    bareTarget = `${PG_URL}?options=-c%20search_path%3D${schema}_bare`;
  }
  const tower = await start(towerArgs, { SVC_HOME: home });
  const token = readFileSync(join(home, 'tower', 'admin.token'), 'utf8').trim();
  const headers = { authorization: `Bearer ${token}`, 'content-type': 'application/json' };
  const post = async (path, body) =>
    (await fetch(tower.url + path, { method: 'POST', headers, body: JSON.stringify(body) })).json();
  const dom = await post('/domains', { name: 'bench' });
  const mis = await post(`/domains/${dom.id}/m`, { name: 'bench' });
  const bare = await start([join(ROOT, 'bench/http/bare-server.mjs'), store, bareTarget]);
  const body = JSON.stringify({ title: 'benchmark task' });
  const targets = {
    towerGet: { url: `${tower.url}/domains/${dom.id}`, headers },
    bareGet: { url: `${bare.url}/domains/d1` },
    towerPost: { url: `${tower.url}/domains/${dom.id}/m/${mis.id}/t`, method: 'POST', headers, body },
    barePost: { url: `${bare.url}/t`, method: 'POST', headers: { 'content-type': 'application/json' }, body },
  };
  const pids = {
    towerGet: tower.child.pid,
    bareGet: bare.child.pid,
    towerPost: tower.child.pid,
    barePost: bare.child.pid,
  };
  const runs = Object.fromEntries(Object.keys(targets).map((k) => [k, []]));
  const results = {};
  try {
    // Warm-up by request count, not time: on a loaded machine 2 s were a few hundred
    // requests, and the tower's first thousands (JIT, lazily built paths) cost 3-4x later ones.
    for (const opts of Object.values(targets))
      await autocannon({ connections: CONNECTIONS, amount: WARMUP, ...opts });
    for (let round = 0; round < ROUNDS; round++) {
      for (const [name, opts] of Object.entries(targets)) runs[name].push(await cannon(opts, pids[name]));
    }
    for (const [name, r] of Object.entries(runs)) results[name] = summarize(r);
  } finally {
    tower.child.kill('SIGTERM');
    bare.child.kill('SIGTERM');
    await new Promise((r) => setTimeout(r, 500));
    rmSync(home, { recursive: true, force: true });
    if (schema) {
      const c = new pg.Client({ connectionString: PG_URL });
      await c.connect();
      await c.query(`drop schema if exists ${schema} cascade; drop schema if exists ${schema}_bare cascade`);
      await c.end();
    }
  }
  return results;
}

const rows = [];
const load = [os.loadavg()[0]];
for (const store of ['sqlite', 'postgres']) {
  const r = await measureStore(store);
  console.log(store, JSON.stringify(r));
  for (const [op, t, b] of [
    ['GET /domains/{id}', r.towerGet, r.bareGet],
    ['POST /domains/{d}/m/{m}/t', r.towerPost, r.barePost],
  ]) {
    rows.push(
      `| ${store} | ${op} | ${t.rps} | ${t.p99} | ${b.rps} | ${b.p99} | ${(b.rps / t.rps).toFixed(2)}x | ${Math.round(t.cpuUs)} | ${Math.round(b.cpuUs)} | ${(t.cpuUs / b.cpuUs).toFixed(2)}x | ${t.errors + b.errors} |`,
    );
  }
}
load.push(os.loadavg()[0]);

writeSection(
  'http',
  `## http — tower REST vs a bare Fastify route

Date ${today()}; machine: ${machine()}.
Command: \`npm run build && npm run bench -- http\` (autocannon, ${CONNECTIONS} connections, ${DURATION} s per run after a warm-up of ${WARMUP} requests per target; ${ROUNDS} rounds alternating tower and bare runs, medians reported; client in the bench process, each server in its own process).
The tower route authenticates a service token (cached lookup), checks the domain/mission, runs the query and, for POST, writes the record and its feed event in one transaction. The bare route is Fastify with the same single query (SELECT by id, or one INSERT), no auth, no event.
Load average (1 min) ${load.map((l) => l.toFixed(1)).join(' at the start, ')} at the end: the machine is shared, so req/s moves with what other processes leave; the CPU columns (server process user + system time per request, from /proc) do not, and compare the work each server does per request.
Target: the tower within 2x of the bare route.

| store | route | tower req/s | tower p99 ms | bare req/s | bare p99 ms | bare/tower | tower CPU µs/req | bare CPU µs/req | CPU tower/bare | errors |
|---|---|---|---|---|---|---|---|---|---|---|
${rows.join('\n')}

Reading: when the machine is loaded, req/s and p99 measure the share of the 2 cores each
server got during its 5 s windows more than the server; the CPU columns are the steadier
comparison of the work done per request (they still rise under contention: cache misses,
context switches). The tower's extra work per request is authentication, the route's scope
and domain checks, metrics, and for POST the feed event (on PostgreSQL also its numbering by
the sequencer, feed/sequencer.ts).
`,
);
