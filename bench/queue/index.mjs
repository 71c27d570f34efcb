// bench/queue: claim + complete of no-op mesh tasks on PostgreSQL, N tasks queued first and C
// concurrent claimers, measured (1) through the tower's queue layer in-process (MeshService),
// (2) end to end through HTTP (POST /mcp/call with a node JWT, a tower listening on a port,
// the claimers in a child process: http-client.mjs), and side by side graphile-worker 0.17
// (its throughput configuration and its defaults) and pg-boss 10 in the same run, same
// database server, same task count and concurrency, each in its own fresh schema. Also the
// claim latency on an empty store and with BENCH_QUEUE_HISTORY completed tasks in it (docs/mesh.md:
// finished tasks must not slow the hot path). Figures, with CPU per task, go to BENCHMARKS.md.
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { availableParallelism as availableCores, loadavg, tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { countChecks, exactlyOnce } from '../lib/counts.mjs';
import { machine, median, met, percentile, ROOT, today, writeSection } from '../lib/report.mjs';

const HERE = dirname(fileURLToPath(import.meta.url));
const PG = process.env.SVC_TEST_PG_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
const TASKS = Number(process.env.BENCH_QUEUE_TASKS ?? 10_000);
// Tasks queued for the current rounds (the runners read it): TASKS, then DEEP.
let N = TASKS;
// How cost grows with the queue's depth (BENCHMARKING.md: each figure at two sizes): the
// batched peers again with DEEP tasks queued. 0: skip.
const DEEP = Number(process.env.BENCH_QUEUE_DEEP ?? 50_000);
const C = Number(process.env.BENCH_QUEUE_CONCURRENCY ?? 16);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const HISTORY = Number(process.env.BENCH_QUEUE_HISTORY ?? 1_000_000);
const LATENCY_CLAIMS = Number(process.env.BENCH_QUEUE_LATENCY_CLAIMS ?? 2000);
const BATCH = Number(process.env.BENCH_QUEUE_BATCH ?? 20);
/** graphile-worker's local queue size (its fair configuration, BENCHMARKING.md). */
const GW_LOCAL_QUEUE = 200;
/** The most `claim_mesh_tasks` / `complete_mesh_tasks` take per call (their `max` / maxItems). */
const MAX_BATCH = 100;
const PEERS = (
  process.env.BENCH_QUEUE_PEERS ??
  'svc,svc-batch,svc-batch-100,svc-http,svc-http-batch,svc-http-batch-100,graphile-worker,graphile-worker-unbatched,pg-boss'
).split(',');

/** Every task queued was completed exactly once, by every peer, or no figures are written. */
const checks = countChecks('queue');

const { createTower } = await import(join(ROOT, 'dist/tower/tower.js'));
const { createMeshService } = await import(join(ROOT, 'dist/tower/mesh/service.js'));
const { silentLogger } = await import(join(ROOT, 'dist/lib/log.js'));

const ADMIN = {
  kind: 'token',
  id: 'bench',
  name: 'bench',
  scopes: ['admin'],
  domains: null,
  expiresAt: null,
};

// CPU per task, the measure to trust on a loaded machine: this process's (and the HTTP client
// process's) and that of the PostgreSQL backends serving the run, found by application_name
// (every pool of the run inherits PGAPPNAME) and read from /proc (the server is local).
const APP = `bench_queue_${process.pid}`;
process.env.PGAPPNAME = APP;
const USER_HZ = 100;

function procCpuMs(pid) {
  try {
    const f = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
    return ((Number(f[11]) + Number(f[12])) * 1000) / USER_HZ;
  } catch {
    return Number.NaN;
  }
}

async function backends() {
  const c = new pg.Client({ connectionString: PG, application_name: `${APP}_sys` });
  await c.connect();
  try {
    const r = await c.query('select pid from pg_stat_activity where application_name = $1', [APP]);
    return r.rows.map((x) => x.pid);
  } finally {
    await c.end();
  }
}

/** Starts counting CPU; the returned function gives ms of CPU (node, PostgreSQL) since. */
async function cpuPhase() {
  const pg0 = new Map((await backends()).map((p) => [p, procCpuMs(p)]));
  const wal0 = await walLsn();
  const self0 = process.cpuUsage();
  return async (otherProcessMs = 0) => {
    const self = process.cpuUsage(self0);
    let pgMs = 0;
    for (const p of await backends()) pgMs += procCpuMs(p) - (pg0.get(p) ?? 0);
    return {
      nodeMs: (self.user + self.system) / 1000 + otherProcessMs,
      pgMs,
      walBytes: (await walLsn()) - wal0,
    };
  };
}

/** The server's WAL position in bytes (the server is this run's alone: its WAL is the run's). */
async function walLsn() {
  const r = await sql("select (pg_current_wal_lsn() - '0/0')::float8 as b");
  return r.rows[0].b;
}

/**
 * When a peer's last completion is committed: its handler returning is not that (graphile-worker
 * and pg-boss record completions after the handler, in batches), so `left` (a query that is
 * true while a job is not recorded complete) is polled on a connection opened beforehand.
 */
async function completionWatcher(left) {
  const c = new pg.Client({ connectionString: PG, application_name: `${APP}_sys` });
  await c.connect();
  return async () => {
    try {
      while ((await c.query(left)).rows[0].left) {
        // One round trip per look: the end is known to within a query's latency.
      }
      return performance.now();
    } finally {
      await c.end();
    }
  };
}

async function sql(text, url = PG) {
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  try {
    return await c.query(text);
  } finally {
    await c.end();
  }
}

async function freshSchema(prefix) {
  const schema = `${prefix}_${process.pid}_${Math.random().toString(36).slice(2, 8)}`;
  await sql(`create schema "${schema}"`);
  return { schema, drop: () => sql(`drop schema if exists "${schema}" cascade`) };
}

/** A tower on a fresh schema with a domain, a mission, a node and C enrolled agents. */
async function svcTower() {
  const s = await freshSchema('bq');
  const dataDir = mkdtempSync(join(tmpdir(), 'svc-bench-queue-'));
  const tower = await createTower({
    dataDir,
    database: `${PG}?schema=${s.schema}`,
    log: silentLogger(),
    rateLimit: { limit: 0, windowMs: 60_000 },
  });
  const admin = readFileSync(join(dataDir, 'admin.token'), 'utf8').trim();
  const call = async (method, url, body, token = admin) => {
    const r = await tower.app.inject({
      method,
      url,
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      payload: JSON.stringify(body),
    });
    return JSON.parse(r.body);
  };
  const domain = await call('POST', '/domains', { name: 'bench' });
  const mission = await call('POST', `/domains/${domain.id}/m`, { name: 'bench' });
  const node = await call('POST', '/nodes', { hostname: 'bench-node' });
  const agents = [];
  for (let i = 0; i < C; i++) {
    agents.push(await call('POST', '/agents', { domain_id: domain.id, runtime: 'beta_cli' }, node.jwt));
  }
  // The queue layer alone: a service of its own on the tower's store, without the tower's
  // hooks (no task notices to nodes while tasks are queued).
  const { store, write, clock } = tower;
  const mesh = createMeshService({ dialect: store.dialect, db: store.db, write, clock, log: silentLogger() });
  return {
    tower,
    mesh,
    mission,
    node,
    agents,
    schemaUrl: `${PG}?schema=${s.schema}`,
    schema: s.schema,
    async enqueue(n) {
      for (let i = 0; i < n; i += 500) {
        await Promise.all(
          Array.from({ length: Math.min(500, n - i) }, (_, j) =>
            mesh.create(ADMIN, mission.id, { title: `t${i + j}` }),
          ),
        );
      }
    },
    async close() {
      await tower.stop();
      await s.drop();
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

/**
 * C loops of claim → complete until the queue is empty; throughput and claim latencies.
 * `claim` returns one claim, null, or (batch) an array of claims completed one by one.
 */
async function drain(claim, complete) {
  const lat = [];
  let done = 0;
  const cpu = await cpuPhase();
  const t0 = performance.now();
  // To the last completion (BENCHMARKING.md), not to each claimer's last, empty claim.
  let last = t0;
  await Promise.all(
    Array.from({ length: C }, async (_, i) => {
      for (;;) {
        const s = performance.now();
        const c = await claim(i);
        lat.push(performance.now() - s);
        const list = Array.isArray(c) ? c : c ? [c] : [];
        if (list.length === 0) return;
        for (const one of list) {
          // `complete` may finish a whole batch at once and return how many it did.
          const n = await complete(i, one);
          done += typeof n === 'number' ? n : 1;
          last = performance.now();
        }
      }
    }),
  );
  const secs = (last - t0) / 1000;
  lat.sort((a, b) => a - b);
  return { done, perSec: done / secs, p50: percentile(lat, 50), p99: percentile(lat, 99), ...(await cpu()) };
}

/** `batch`: tasks claimed per call and completed per call (0: one task per call). */
/**
 * A checkpoint just before a peer queues its tasks. The first change of a page after a
 * checkpoint starts writes the whole page to the WAL, and with this bench's write volume a
 * checkpoint is under way most of the time (timed every 5 min and by max_wal_size): without
 * this, whether a peer's drain met a fresh one was chance. An explicit checkpoint resets both
 * triggers, so each peer's enqueue and drain run inside one interval and its drain changes
 * pages its enqueue already wrote. (It did not explain graphile-worker's spread on the
 * shared machine of 2026-11-24: 8 800 tasks/s in rounds with it, 5 470 to 15 338 without.)
 */
async function settle() {
  await sql('checkpoint');
}

/** The tasks of a store by state: every one of the N must end `completed`, none other. */
async function taskStates(t) {
  const c = new pg.Client({ connectionString: PG, application_name: `${APP}_sys` });
  await c.connect();
  try {
    await c.query(`set search_path to "${t.schema}"`);
    const r = await c.query('select state, count(*)::int as n from mesh_tasks group by state');
    return Object.fromEntries(r.rows.map((x) => [x.state, x.n]));
  } finally {
    await c.end();
  }
}

async function runSvc(http, batch) {
  const t = await svcTower();
  try {
    await settle();
    await t.enqueue(N);
    const out = await drainSvc(t, http, batch);
    out.states = await taskStates(t);
    return out;
  } finally {
    await t.close();
  }
}

/** One drain of svc's queue (in-process or over HTTP, one task or `batch` per call). */
async function drainSvc(t, http, batch) {
  // The id of every task claimed, once per claim (the checks look for repeats).
  const ids = [];
  if (!http && batch) {
    // The batch claimed in one call is completed in one call (completeMany).
    const r = await drain(
      async (i) => {
        const claims = await t.mesh.claimMany(ADMIN, t.agents[i].id, t.mission.id, batch);
        for (const c of claims) ids.push(c.task.id);
        return claims.length > 0 ? [claims] : null;
      },
      async (_i, claims) => {
        const acks = await t.mesh.completeMany(
          ADMIN,
          claims.map((c) => ({ task_id: c.task.id, lease_id: c.lease_id })),
        );
        if (!acks.every((x) => x.ok)) throw new Error('a completion failed');
        return claims.length;
      },
    );
    return { ...r, ids };
  }
  if (!http) {
    const r = await drain(
      async (i) => {
        const c = await t.mesh.claim(ADMIN, t.agents[i].id, t.mission.id);
        if (c) ids.push(c.task.id);
        return c;
      },
      (_i, c) => t.mesh.complete(ADMIN, c.task.id, c.lease_id, null),
    );
    return { ...r, ids };
  }
  // The HTTP claimers run in a child process: the tower's event loop serves requests only.
  const url = await t.tower.listen('127.0.0.1', 0);
  const arg = JSON.stringify({
    url,
    jwt: t.node.jwt,
    agents: t.agents.map((a) => a.id),
    mission: t.mission.id,
    batch,
  });
  const cpu = await cpuPhase();
  const child = spawn(process.execPath, [join(HERE, 'http-client.mjs'), arg], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  let out = '';
  child.stdout.on('data', (d) => {
    out += d;
  });
  const code = await new Promise((r) => child.on('close', r));
  if (code !== 0) throw new Error(`http-client exited with ${code}`);
  const r = JSON.parse(out);
  r.lat.sort((a, b) => a - b);
  return {
    done: r.done,
    ids: r.ids,
    perSec: r.done / r.secs,
    p50: percentile(r.lat, 50),
    p99: percentile(r.lat, 99),
    ...(await cpu(r.cpuMs)),
    clientMs: r.cpuMs,
  };
}

/**
 * graphile-worker with C concurrent jobs. `batch` true: its throughput configuration (a local
 * queue of GW_LOCAL_QUEUE jobs fetched per call, completions batched), the target; false: its
 * defaults (each job fetched by its own get_job call and completed by its own complete_job
 * call), the counterpart of one task per call (svc, svc-http).
 */
async function runGraphile(batch) {
  const { run, makeWorkerUtils, Logger } = await import('graphile-worker');
  const quiet = new Logger(() => () => {});
  const s = await freshSchema('bq_gw');
  const preset = {
    worker: {
      connectionString: PG,
      schema: s.schema,
      concurrentJobs: C,
      ...(batch
        ? { localQueue: { size: GW_LOCAL_QUEUE }, completeJobBatchDelay: 0, failJobBatchDelay: 0 }
        : {}),
      maxPoolSize: C + 4,
      pollInterval: 100,
    },
  };
  try {
    const utils = await makeWorkerUtils({ connectionString: PG, schema: s.schema, logger: quiet });
    await utils.migrate();
    await settle();
    for (let i = 0; i < N; i += 1000) {
      await utils.addJobs(
        Array.from({ length: Math.min(1000, N - i) }, () => ({ identifier: 'noop', payload: {} })),
      );
    }
    await utils.release();
    let done = 0;
    const ids = [];
    let finish;
    const all = new Promise((r) => {
      finish = r;
    });
    const watch = await completionWatcher(
      `select exists (select 1 from "${s.schema}"._private_jobs) as left`,
    );
    const cpu = await cpuPhase();
    const beforeRun = performance.now();
    const runner = await run({
      preset,
      noHandleSignals: true,
      logger: quiet,
      taskList: {
        noop: async (_payload, helpers) => {
          ids.push(helpers.job.id);
          if (++done === N) finish();
        },
      },
    });
    // Counted from the first claim, as svc's drain is: graphile-worker fetches its first jobs
    // after run() has set up its pool and listener (5-9 ms here, before its first job at
    // 15-23 ms), so the count starts when run() resolves, unless a job finished before that.
    const t0 = done === 0 ? performance.now() : beforeRun;
    await all;
    const secs = ((await watch()) - t0) / 1000;
    const used = await cpu();
    await runner.stop();
    // Every job ran, and its completion is recorded: none is left in the job table.
    const left = await sql(`select count(*)::int as n from "${s.schema}"._private_jobs`);
    return {
      done,
      ids,
      states: { completed: N - left.rows[0].n, ...(left.rows[0].n ? { left: left.rows[0].n } : {}) },
      perSec: done / secs,
      p50: Number.NaN,
      p99: Number.NaN,
      ...used,
    };
  } finally {
    await s.drop();
  }
}

async function runPgBoss() {
  const { default: PgBoss } = await import('pg-boss');
  const schema = `bq_pb_${process.pid}_${Math.random().toString(36).slice(2, 8)}`;
  // pg-boss names its connections itself; ours lets the CPU count find them.
  const boss = new PgBoss({
    connectionString: PG,
    schema,
    max: C + 4,
    supervise: false,
    schedule: false,
    application_name: APP,
  });
  boss.on('error', () => {});
  await boss.start();
  try {
    await boss.createQueue('noop');
    await settle();
    for (let i = 0; i < N; i += 1000) {
      await boss.insert(Array.from({ length: Math.min(1000, N - i) }, () => ({ name: 'noop', data: {} })));
    }
    let done = 0;
    const ids = [];
    let finish;
    const all = new Promise((r) => {
      finish = r;
    });
    const watch = await completionWatcher(
      `select exists (select 1 from "${schema}".job where name = 'noop' and state <> 'completed') as left`,
    );
    const cpu = await cpuPhase();
    const t0 = performance.now();
    for (let w = 0; w < C; w++) {
      await boss.work('noop', { batchSize: 100, pollingIntervalSeconds: 0.5 }, async (jobs) => {
        for (const j of jobs) ids.push(j.id);
        done += jobs.length;
        if (done >= N) finish();
      });
    }
    await all;
    const secs = ((await watch()) - t0) / 1000;
    const used = await cpu();
    const r = await sql(
      `select state, count(*)::int as n from "${schema}".job where name = 'noop' group by state`,
    );
    const states = Object.fromEntries(r.rows.map((x) => [x.state, x.n]));
    return { done, ids, states, perSec: done / secs, p50: Number.NaN, p99: Number.NaN, ...used };
  } finally {
    await boss.stop({ graceful: false, wait: true });
    await sql(`drop schema if exists "${schema}" cascade`);
  }
}

/**
 * Claim latency (single claimer) on one store per entry of `histories`, each with that many
 * completed tasks already in its table. The stores take turns, one claim + complete each, so
 * a loaded machine's noise falls on all of them alike and the ratio stays comparable.
 */
async function claimLatencies(histories) {
  const towers = [];
  try {
    for (const history of histories) {
      const t = await svcTower();
      towers.push(t);
      if (history > 0) {
        const c = new pg.Client({ connectionString: PG });
        await c.connect();
        await c.query(`set search_path to "${t.schema}"`);
        // Bulk, not through the API: a million API calls would take most of an hour.
        await c.query(
          `insert into mesh_tasks (id, mission_id, domain_id, parent_id, title, description, claim_policy,
             priority, assigned_agent_id, required_capabilities, state, attempt, max_attempts,
             lease_seconds, claimed_by, result, failure_reason, created_at, updated_at)
           select 'mt_hist' || lpad(g::text, 10, '0'), $1, $2, null, 'old', '', 'first_claim', 0, null,
             '[]', 'completed', 1, 3, 60, $3, null, null, '2026-01-01T00:00:00.000Z', '2026-01-01T00:00:00.000Z'
           from generate_series(1, $4) g`,
          [t.mission.id, t.mission.domain_id, t.agents[0].id, history],
        );
        // Each listed under its mission, as the API writes them (migration 22).
        await c.query(
          `insert into mesh_task_missions (mission_id, id)
           select $1, 'mt_hist' || lpad(g::text, 10, '0') from generate_series(1, $2) g`,
          [t.mission.id, history],
        );
        // Steady state, as a store that accumulated its history would be: the bulk insert's
        // visibility map, statistics and dirty pages settled before measuring.
        await c.query('vacuum analyze mesh_tasks, mesh_task_missions');
        await c.query('checkpoint');
        await c.end();
      }
    }
    // Entries of the pending index the claims read: a count, unlike the times, that a loaded
    // machine does not blur. Finished tasks are not in that index, so history must not change it.
    const indexReads = async (t) => {
      const r = await sql(
        `select idx_tup_read::float8 as n from pg_stat_user_indexes
         where schemaname = '${t.schema}' and indexrelname = 'mesh_tasks_pending'`,
      );
      return r.rows[0]?.n ?? Number.NaN;
    };
    // ROUNDS rounds on the same stores, each queueing LATENCY_CLAIMS tasks and claiming them;
    // medians of the rounds' figures, as for throughput: a p99 of one round (its 20 slowest
    // claims of 2000) moved by up to 1.7x between runs on the same code.
    const rounds = towers.map(() => []);
    for (let r = 0; r < ROUNDS; r++) {
      for (const t of towers) await t.enqueue(LATENCY_CLAIMS);
      const readsBefore = [];
      for (const t of towers) readsBefore.push(await indexReads(t));
      const lats = towers.map(() => []);
      for (let i = 0; i < LATENCY_CLAIMS; i++) {
        for (const [k, t] of towers.entries()) {
          const s = performance.now();
          const c = await t.mesh.claim(ADMIN, t.agents[0].id, t.mission.id);
          lats[k].push(performance.now() - s);
          if (!c) {
            checks.that(false, `latency round ${r + 1}: claim ${i + 1} of ${LATENCY_CLAIMS} found no task`);
            break;
          }
          await t.mesh.complete(ADMIN, c.task.id, c.lease_id, null);
        }
      }
      // Index statistics reach pg_stat_user_indexes when a backend flushes them: at most once
      // a second while busy, and within 10 s once idle (PostgreSQL 15's PGSTAT_IDLE_INTERVAL);
      // after 1.5 s a short round's reads could still be missing and land in the next round's.
      await new Promise((r) => setTimeout(r, 11_000));
      for (const [k, lat] of lats.entries()) {
        lat.sort((a, b) => a - b);
        const reads = (await indexReads(towers[k])) - readsBefore[k];
        const one = {
          p50: percentile(lat, 50),
          p99: percentile(lat, 99),
          readsPerClaim: reads / LATENCY_CLAIMS,
        };
        rounds[k].push(one);
        console.log(
          `round ${r + 1} claim latency with ${histories[k]} completed tasks: p50 ${one.p50.toFixed(2)} ms p99 ${one.p99.toFixed(2)} ms`,
        );
      }
    }
    const out = rounds.map((rs) => ({
      p50: median(rs.map((x) => x.p50)),
      p99: median(rs.map((x) => x.p99)),
      readsPerClaim: median(rs.map((x) => x.readsPerClaim)),
    }));
    return out;
  } finally {
    for (const t of towers) await t.close();
  }
}

const RUNNERS = {
  svc: () => runSvc(false, 0),
  'svc-batch': () => runSvc(false, BATCH),
  [`svc-batch-${MAX_BATCH}`]: () => runSvc(false, MAX_BATCH),
  'svc-http': () => runSvc(true, 0),
  'svc-http-batch': () => runSvc(true, BATCH),
  [`svc-http-batch-${MAX_BATCH}`]: () => runSvc(true, MAX_BATCH),
  'graphile-worker': () => runGraphile(true),
  'graphile-worker-unbatched': () => runGraphile(false),
  'pg-boss': runPgBoss,
};
const load = [loadavg()[0]];
/** ROUNDS rounds of `peers`, alternating within each round, with N tasks queued. */
async function rounds(peers) {
  const out = Object.fromEntries(peers.map((p) => [p, []]));
  for (let r = 0; r < ROUNDS; r++) {
    for (const p of peers) {
      const res = await RUNNERS[p]();
      // Each of the N tasks claimed (or run) once and recorded complete once, none left.
      const what = `${p} round ${r + 1} (${N} tasks)`;
      checks.exact(`${what}: completions counted`, res.done, N);
      exactlyOnce(checks, `${what}: tasks claimed`, res.ids, N);
      checks.that(
        res.states.completed === N && Object.keys(res.states).length === 1,
        `${what}: the store should hold ${N} completed tasks and nothing else, holds ${JSON.stringify(res.states)}`,
      );
      delete res.ids;
      out[p].push(res);
      console.log(
        `round ${r + 1} ${p} (${N} tasks): ${res.perSec.toFixed(0)} tasks/s, claim p50 ${res.p50.toFixed(2)} ms p99 ${res.p99.toFixed(2)} ms, CPU per task: node ${(res.nodeMs / N).toFixed(3)} ms, PostgreSQL ${(res.pgMs / N).toFixed(3)} ms, WAL ${(res.walBytes / N).toFixed(0)} B/task${res.clientMs === undefined ? '' : ` (of node: HTTP client ${(res.clientMs / N).toFixed(3)} ms)`} (load ${loadavg()[0].toFixed(1)})`,
      );
    }
  }
  return out;
}
const results = await rounds(PEERS);
load.push(loadavg()[0]);
const med = (p, k) => median(results[p].map((x) => x[k]));
const ms = (v) => (Number.isNaN(v) ? '–' : v.toFixed(2));
const us = (v, n = N) => (Number.isNaN(v) ? '–' : ((v / n) * 1000).toFixed(0));
const rows = PEERS.map(
  (p) =>
    `| ${p} | ${med(p, 'perSec').toFixed(0)} | ${ms(med(p, 'p50'))} | ${ms(med(p, 'p99'))} | ${us(med(p, 'nodeMs'))} | ${us(med(p, 'pgMs'))} | ${us(med(p, 'nodeMs') + med(p, 'pgMs'))} | ${(med(p, 'walBytes') / N).toFixed(0)} |`,
);

// The batched peers again with DEEP tasks queued (the one-per-call ones would take minutes).
const DEEP_PEERS = PEERS.filter((p) => /batch-\d|^graphile-worker$|^pg-boss$/.test(p));
let deepRows = [];
let deepVerdict = '';
if (DEEP > 0 && DEEP_PEERS.length > 0) {
  N = DEEP;
  const deep = await rounds(DEEP_PEERS);
  N = TASKS;
  const dmed = (p, k) => median(deep[p].map((x) => x[k]));
  deepRows = DEEP_PEERS.map(
    (p) =>
      `| ${p} | ${med(p, 'perSec').toFixed(0)} | ${dmed(p, 'perSec').toFixed(0)} | ${us(med(p, 'nodeMs') + med(p, 'pgMs'))} | ${us(dmed(p, 'nodeMs') + dmed(p, 'pgMs'), DEEP)} |`,
  );
  if (deep['svc-batch-100'] && deep['graphile-worker'])
    deepVerdict = `With ${DEEP} tasks queued: svc-batch-100 / graphile-worker = ${(dmed('svc-batch-100', 'perSec') / dmed('graphile-worker', 'perSec')).toFixed(3)}.\n`;
}

const lat = [];
const p99s = [];
const histories = HISTORY > 0 ? [0, HISTORY] : [0];
for (const [k, l] of (await claimLatencies(histories)).entries()) {
  const h = histories[k];
  p99s.push(l.p99);
  console.log(
    `claim latency with ${h} completed tasks: p50 ${l.p50.toFixed(2)} ms p99 ${l.p99.toFixed(2)} ms, pending-index entries read per claim ${l.readsPerClaim.toFixed(2)}`,
  );
  lat.push(
    `| ${h.toLocaleString('en-US')} | ${l.p50.toFixed(2)} | ${l.p99.toFixed(2)} | ${l.readsPerClaim.toFixed(2)} |`,
  );
}

const ratio = (a, b) =>
  PEERS.includes(a) && PEERS.includes(b) ? (med(a, 'perSec') / med(b, 'perSec')).toFixed(3) : 'n/a';
const loadNote = `Load average (1 min) ${load[0].toFixed(1)} at the start of the throughput rounds, ${load[1].toFixed(1)} at their end, ${loadavg()[0].toFixed(1)} after the latency runs, on ${availableCores()} cores.`;
const pairs = [
  // The targets are read at svc's throughput configuration, the API's largest batch (100
  // per call), as graphile-worker's is its local queue (200 per fetch); batches of 20 show
  // how throughput grows with the batch.
  ['svc-batch', 'graphile-worker', `batches of ${BATCH}, no target`],
  [`svc-batch-${MAX_BATCH}`, 'graphile-worker', 'target >= 1'],
  ['svc', 'graphile-worker-unbatched', 'one task per call on both sides'],
  ['svc-http-batch', 'graphile-worker', `batches of ${BATCH}, no target`],
  [`svc-http-batch-${MAX_BATCH}`, 'graphile-worker', 'target >= 0.33'],
  ['svc-http', 'graphile-worker-unbatched', 'one task per call on both sides'],
].filter(([a, b]) => PEERS.includes(a) && PEERS.includes(b));
const summary = [
  [
    `svc-batch-${MAX_BATCH}`,
    'graphile-worker',
    1,
    `svc-batch-${MAX_BATCH} / graphile-worker ≥ 1 (${TASKS} queued)`,
  ],
  [
    `svc-http-batch-${MAX_BATCH}`,
    'graphile-worker',
    0.33,
    `svc-http-batch-${MAX_BATCH} / graphile-worker ≥ 0.33 (over HTTP)`,
  ],
]
  .filter(([a, b]) => PEERS.includes(a) && PEERS.includes(b))
  .map(([a, b, target, text]) => ({
    peer: 'graphile-worker 0.17 (pg-boss 10 beside)',
    target: text,
    result: `${ratio(a, b)} (${med(a, 'perSec').toFixed(0)} vs ${med(b, 'perSec').toFixed(0)} tasks/s)`,
    met: met(med(a, 'perSec') / med(b, 'perSec') >= target),
  }));
if (p99s.length === 2) {
  summary.push({
    peer: '–',
    target: `claim p99 with ${HISTORY.toLocaleString('en-US')} completed tasks / empty store ≤ 1.5`,
    result: `${(p99s[1] / p99s[0]).toFixed(2)} (${p99s[1].toFixed(2)} vs ${p99s[0].toFixed(2)} ms)`,
    met: met(p99s[1] / p99s[0] <= 1.5),
  });
}
const verdict = `Throughput ratios: ${pairs.map(([a, b, t]) => `${a} / ${b} = ${ratio(a, b)} (${t})`).join('; ')}.
${deepVerdict}Claim p99 with history / empty = ${p99s.length === 2 ? (p99s[1] / p99s[0]).toFixed(2) : 'n/a'} (target <= 1.5).`;
checks.orExit();
writeSection(
  'queue',
  `## Queue (bench/queue)

${today()}, ${machine()}. Command: \`npm run build && npm run bench -- queue\`
(BENCH_QUEUE_TASKS=${N}, BENCH_QUEUE_DEEP=${DEEP}, BENCH_QUEUE_CONCURRENCY=${C}, BENCH_QUEUE_BATCH=${BATCH},
BENCH_ROUNDS=${ROUNDS}). ${N} no-op tasks queued first, ${C} concurrent claimers, claim +
complete each, counted from the first claim to the last completion; median of ${ROUNDS}
rounds, peers alternating within each round; all on the same local PostgreSQL server, each
in a fresh schema. Counts are checked in every round, or nothing is written: each peer's
${N} tasks claimed (or run) once each, as many completions counted, and its store holding
them all completed and nothing else. CPU per task: the bench process (with the tower in it) plus, for HTTP, the
client process, and the PostgreSQL backends serving the run (by \`application_name\`, from
\`/proc\`), over the drain only: on a shared machine the figure to compare when the load
moves the throughput. WAL bytes per task: how far the server's WAL position moved over the
drain (nothing else writes to this server during a run), a count the machine's load does
not blur.

- **svc**: the tower's queue layer in-process (\`MeshService.claim\` / \`complete\`): on
  PostgreSQL each claim is one statement (pick with \`FOR UPDATE SKIP LOCKED\`, update, append
  the \`matrix\` event), completes of concurrent claimers are coalesced into shared statements.
  Events take their id at insert; the feed's sequencer then moves the readers' watermark past
  them (part of the measured cost).
- **svc-batch** / **svc-batch-${MAX_BATCH}**: the same, each claimer claiming up to
  ${BATCH} / ${MAX_BATCH} (the API's maximum) tasks per call (\`MeshService.claimMany\`, the
  \`claim_mesh_tasks\` tool) and completing them in one call (\`completeMany\`,
  \`complete_mesh_tasks\`): the counterpart of graphile-worker's local queue (${GW_LOCAL_QUEUE} jobs per
  fetch) and batched completions.
- **svc-http**, **svc-http-batch**, **svc-http-batch-${MAX_BATCH}**: the same through HTTP,
  \`POST /mcp/call\` (\`claim_mesh_task\` / \`complete_mesh_task\`, or \`claim_mesh_tasks\`
  then one \`complete_mesh_tasks\` per batch) with a node JWT; the claimers run in a child
  process (node:http, keep-alive), so the tower's event loop only serves requests; rate limit off.
- **graphile-worker 0.17** (the target): its throughput configuration from BENCHMARKING.md,
  \`localQueue.size = ${GW_LOCAL_QUEUE}\`, \`completeJobBatchDelay: 0\`, \`failJobBatchDelay: 0\`,
  concurrency ${C}, pool ${C + 4}; jobs added with \`addJobs\`; no-op handler. It fetches
  ${GW_LOCAL_QUEUE} jobs per query and completes jobs in batches, so compare it with the batch rows.
  No per-claim latency (claims are batched by the local queue).
- **graphile-worker-unbatched**: graphile-worker's defaults (no local queue, each job fetched
  by its own \`get_job\` and completed by its own \`complete_job\`), concurrency ${C}: the
  counterpart of one task per call (svc, svc-http).
- **pg-boss 10**: ${C} workers with \`batchSize: 100\`; jobs added with \`insert\`.

| peer | tasks/s | claim p50 ms | claim p99 ms | node CPU µs/task | PostgreSQL CPU µs/task | total CPU µs/task | WAL bytes/task |
|---|---|---|---|---|---|---|---|
${rows.join('\n')}

${
  deepRows.length > 0
    ? `How throughput grows with the queue's depth: the batched peers again with ${DEEP} tasks queued
(same concurrency, ${ROUNDS} rounds, medians; total CPU is node + PostgreSQL per task):

| peer | tasks/s, ${TASKS} queued | tasks/s, ${DEEP} queued | total CPU µs/task, ${TASKS} | total CPU µs/task, ${DEEP} |
|---|---|---|---|---|
${deepRows.join('\n')}

`
    : ''
}Claim latency as history grows (one claimer per store, ${LATENCY_CLAIMS} claims + completes per round, in-process,
completed tasks bulk-inserted first and vacuumed; the stores take turns claim by claim; ${ROUNDS} rounds on the same
stores, medians):

| completed tasks in store | claim p50 ms | claim p99 ms | pending-index entries read per claim |
|---|---|---|---|
${lat.join('\n')}

${verdict}

${loadNote}

Where the time goes (per-backend CPU of the two statements run alone, 10 000 tasks in
batches of 100, and pg_stat_statements over a run; not this run's figures): per task svc
updates the task row twice (each update a new row version, a row lock and one or two index
entries) and writes its two \`matrix\` events as part of two event blocks, where
graphile-worker updates one row and deletes it. On one connection the claim is about 14 µs
of PostgreSQL CPU per task and the complete about 13.5 µs (priced in an earlier session:
the events about 4 and 3 µs, returning the whole task row about 2); on 4 connections at
once 16.5 and 15.5, on 16 about 24 and 19 (claims step over the rows other claims hold,
completions share heap pages): the tower runs them on a pool of 4 connections. With one task per call the
PostgreSQL side is per-statement overhead (executor start of a five-CTE statement, commit);
batched it is the rows. That pool plans its statements generically from the first
execution (left to choose, PostgreSQL planned the first five on each connection for their
values, 0.3 ms each, and the batched completion every time); a fresh connection still costs
about 5.6 ms of PostgreSQL CPU before its first claim and completion run. The HTTP path
adds about 0.25–0.3 ms of tower CPU per request (routing, JWT, argument validation, JSON)
on top of the queue layer. Of a batched claim's rows the tower gets back 17 columns per
task as arrays, and a batched completion answers each task with an acknowledgement (its id
and completion time), not the task: receiving and parsing a task's 26 columns cost the tower
about 8 µs, the drain's tower CPU fell from about 30 to 14–20 µs per task.
`,
  summary,
);
process.exit(0);
