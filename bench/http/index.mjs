// bench/http: authenticated GET /domains/{id} and POST of a regular task through the tower,
// on SQLite and PostgreSQL, against a bare Fastify route doing the same single query.
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os, { tmpdir } from 'node:os';
import { join } from 'node:path';
import autocannon from 'autocannon';
import Database from 'better-sqlite3';
import pg from 'pg';
import { countChecks } from '../lib/counts.mjs';
import { machine, median, met, ROOT, today, writeSection } from '../lib/report.mjs';

const DURATION = Number(process.env.BENCH_DURATION ?? 5);
/** Tower and bare runs alternate, so load from elsewhere on the machine hits both alike. */
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const CONNECTIONS = 32;
/** Requests sent to each target before measuring. */
const WARMUP = Number(process.env.BENCH_HTTP_WARMUP ?? 5000);
const PG_URL = process.env.SVC_TEST_PG_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
/** Every request answered 2xx, every POST stored exactly one row, or no figures are written. */
const checks = countChecks('http');

/**
 * Checks one autocannon run: no errors, timeouts or non-2xx, every completed request a 2xx.
 * Returns its requests answered (2xx) and sent: a timed run stops with up to one request in
 * flight per connection, sent but unanswered, which the server may or may not have handled.
 */
function answered(what, r) {
  checks.exact(`${what}: errors`, r.errors, 0);
  checks.exact(`${what}: timeouts`, r.timeouts, 0);
  checks.exact(`${what}: non-2xx answers`, r.non2xx, 0);
  checks.exact(`${what}: 2xx answers of the requests completed`, r['2xx'], r.requests.total);
  return { ok: r['2xx'], sent: r.requests.sent };
}

/** A POST target stored one row per request it handled: answered ≤ stored ≤ sent. */
function storedOnce(what, stored, { ok, sent }) {
  checks.that(
    stored >= ok && stored <= sent,
    `${what}: ${stored} rows stored where ${ok} POSTs were answered and ${sent} sent`,
  );
}

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
async function cannon(what, opts, pid) {
  const c0 = pid ? cpuMs(pid) : 0;
  const r = await autocannon({ connections: CONNECTIONS, duration: DURATION, ...opts });
  const cpuUs = pid && r.requests.total ? ((cpuMs(pid) - c0) * 1000) / r.requests.total : Number.NaN;
  return {
    rps: Math.round(r.requests.average),
    p99: r.latency.p99,
    errors: r.errors + r.non2xx + r.timeouts,
    n: answered(what, r),
    cpuUs,
  };
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

/** Rows the POST routes stored: the tower's regular tasks and the bare server's table. */
async function storedRows(store, home, schema, bareTarget) {
  if (store === 'sqlite') {
    const count = (file, table) => {
      const db = new Database(file, { readonly: true });
      try {
        return db.prepare(`select count(*) as n from ${table}`).get().n;
      } finally {
        db.close();
      }
    };
    return { tower: count(join(home, 'tower', 'tower.db'), 'board_tasks'), bare: count(bareTarget, 't') };
  }
  const c = new pg.Client({ connectionString: PG_URL });
  await c.connect();
  try {
    const count = async (table) => Number((await c.query(`select count(*) as n from ${table}`)).rows[0].n);
    return { tower: await count(`${schema}.board_tasks`), bare: await count(`${schema}_bare.t`) };
  } finally {
    await c.end();
  }
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
  /** Requests answered and sent per target, warm-up included (each POST stores one row). */
  const n = Object.fromEntries(Object.keys(targets).map((k) => [k, { ok: 0, sent: 0 }]));
  const add = (name, x) => {
    n[name].ok += x.ok;
    n[name].sent += x.sent;
  };
  try {
    // Warm-up by request count, not time: on a loaded machine 2 s were a few hundred
    // requests, and the tower's first thousands (JIT, lazily built paths) cost 3-4x later ones.
    for (const [name, opts] of Object.entries(targets)) {
      const r = await autocannon({ connections: CONNECTIONS, amount: WARMUP, ...opts });
      add(name, answered(`${store} ${name} warm-up`, r));
      checks.exact(`${store} ${name} warm-up: requests completed`, r.requests.total, WARMUP);
    }
    for (let round = 0; round < ROUNDS; round++) {
      for (const [name, opts] of Object.entries(targets)) {
        const r = await cannon(`${store} ${name} round ${round + 1}`, opts, pids[name]);
        add(name, r.n);
        runs[name].push(r);
      }
    }
    for (const [name, r] of Object.entries(runs)) results[name] = summarize(r);
    const stored = await storedRows(store, home, schema, bareTarget);
    storedOnce(`${store} tower: regular tasks`, stored.tower, n.towerPost);
    storedOnce(`${store} bare: rows`, stored.bare, n.barePost);
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
const ratios = [];
const load = [os.loadavg()[0]];
for (const store of ['sqlite', 'postgres']) {
  const r = await measureStore(store);
  console.log(store, JSON.stringify(r));
  for (const [op, t, b] of [
    ['GET /domains/{id}', r.towerGet, r.bareGet],
    ['POST /domains/{d}/m/{m}/t', r.towerPost, r.barePost],
  ]) {
    ratios.push({ where: `${store} ${op.split(' ')[0]}`, rps: b.rps / t.rps, cpu: t.cpuUs / b.cpuUs });
    rows.push(
      `| ${store} | ${op} | ${t.rps} | ${t.p99} | ${b.rps} | ${b.p99} | ${(b.rps / t.rps).toFixed(2)}x | ${Math.round(t.cpuUs)} | ${Math.round(b.cpuUs)} | ${(t.cpuUs / b.cpuUs).toFixed(2)}x | ${t.errors + b.errors} |`,
    );
  }
}
load.push(os.loadavg()[0]);
const worst = ratios.reduce((a, b) => (b.rps > a.rps ? b : a));
const worstCpu = ratios.reduce((a, b) => (b.cpu > a.cpu ? b : a));

checks.orExit();
writeSection(
  'http',
  `## http — tower REST vs a bare Fastify route

Date ${today()}; machine: ${machine()}.
Command: \`npm run build && npm run bench -- http\` (autocannon, ${CONNECTIONS} connections, ${DURATION} s per run after a warm-up of ${WARMUP} requests per target; ${ROUNDS} rounds alternating tower and bare runs, medians reported; client in the bench process, each server in its own process).
The tower route authenticates a service token (cached lookup), checks the domain/mission, runs the query and, for POST, writes the record and its feed event in one transaction. The bare route is Fastify with the same single query (SELECT by id, or one INSERT), no auth, no event.
Load average (1 min) ${load.map((l) => l.toFixed(1)).join(' at the start, ')} at the end: the machine is shared, so req/s moves with what other processes leave; the CPU columns (server process user + system time per request, from /proc) do not, and compare the work each server does per request.
Target: the tower within 2x of the bare route.
Counts are checked, or nothing is written: every request of every run (warm-up included) answered 2xx, no error or timeout, and each store holding one row per POST it handled (at least one per POST answered, at most one per POST sent: a timed run stops with up to one request per connection in flight).

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
  [
    {
      peer: 'bare Fastify route, same query',
      target: 'tower within 2x of the bare route (req/s)',
      result: `worst ${worst.rps.toFixed(2)}x (${worst.where}); CPU per request worst ${worstCpu.cpu.toFixed(2)}x (${worstCpu.where})`,
      met: met(ratios.every((x) => x.rps <= 2)),
    },
  ],
);
