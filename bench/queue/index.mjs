// bench/queue: claim + complete of no-op mesh tasks on PostgreSQL, N tasks queued first and C
// concurrent claimers, measured (1) through the tower's queue layer in-process (MeshService),
// (2) end to end through HTTP (POST /mcp/call with a node JWT, a tower listening on a port),
// and side by side graphile-worker 0.17 and pg-boss 10 in the same run, same database server,
// same task count and concurrency, each in its own fresh schema. Also the claim latency on an
// empty store and with BENCH_QUEUE_HISTORY completed tasks in it (DESIGN: finished tasks must
// not slow the hot path). Everything runs in this one process; figures go to BENCHMARKS.md.
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { availableParallelism as availableCores, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { machine, median, percentile, ROOT, today, writeSection } from '../lib/report.mjs';

const PG = process.env.SVC_TEST_PG_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
const N = Number(process.env.BENCH_QUEUE_TASKS ?? 10_000);
const C = Number(process.env.BENCH_QUEUE_CONCURRENCY ?? 16);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const HISTORY = Number(process.env.BENCH_QUEUE_HISTORY ?? 1_000_000);
const LATENCY_CLAIMS = Number(process.env.BENCH_QUEUE_LATENCY_CLAIMS ?? 2000);
const BATCH = Number(process.env.BENCH_QUEUE_BATCH ?? 20);
const PEERS = (
  process.env.BENCH_QUEUE_PEERS ?? 'svc,svc-batch,svc-http,svc-http-batch,graphile-worker,pg-boss'
).split(',');

const { createTower } = await import(join(ROOT, 'dist/tower/tower.js'));
const { MeshService } = await import(join(ROOT, 'dist/tower/mesh/service.js'));
const { silentLogger } = await import(join(ROOT, 'dist/lib/log.js'));

const ADMIN = {
  kind: 'token',
  id: 'bench',
  name: 'bench',
  scopes: ['admin'],
  domains: null,
  expiresAt: null,
};

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
  const mesh = new MeshService(tower.ctx, {});
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
  const t0 = performance.now();
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
        }
      }
    }),
  );
  const secs = (performance.now() - t0) / 1000;
  lat.sort((a, b) => a - b);
  return { done, perSec: done / secs, p50: percentile(lat, 50), p99: percentile(lat, 99) };
}

async function runSvc(http, batch) {
  const t = await svcTower();
  try {
    await t.enqueue(N);
    if (!http && batch) {
      // The batch claimed in one call is completed in one call (completeMany).
      return await drain(
        async (i) => {
          const claims = await t.mesh.claimMany(ADMIN, t.agents[i].id, t.mission.id, BATCH);
          return claims.length > 0 ? [claims] : null;
        },
        async (_i, claims) => {
          const r = await t.mesh.completeMany(
            ADMIN,
            claims.map((c) => ({ task_id: c.task.id, lease_id: c.lease_id })),
          );
          if (!r.every((x) => x.ok)) throw new Error('a completion failed');
          return claims.length;
        },
      );
    }
    if (!http) {
      return await drain(
        (i) => t.mesh.claim(ADMIN, t.agents[i].id, t.mission.id),
        (_i, c) => t.mesh.complete(ADMIN, c.task.id, c.lease_id, null),
      );
    }
    const url = await t.tower.listen('127.0.0.1', 0);
    const mcp = async (tool, args) => {
      const r = await fetch(`${url}/mcp/call`, {
        method: 'POST',
        headers: { authorization: `Bearer ${t.node.jwt}`, 'content-type': 'application/json' },
        body: JSON.stringify({ tool, args }),
      });
      const body = await r.json();
      if (r.status !== 200) throw new Error(`${tool}: ${r.status} ${JSON.stringify(body)}`);
      return body.result;
    };
    if (batch) {
      // The batch claimed in one call is completed in one call (complete_mesh_tasks).
      return await drain(
        async (i) => {
          const r = await mcp('claim_mesh_tasks', {
            agent_id: t.agents[i].id,
            mission_id: t.mission.id,
            max: BATCH,
          });
          return r.items.length > 0 ? [r.items] : null;
        },
        async (_i, claims) => {
          const r = await mcp('complete_mesh_tasks', {
            items: claims.map((c) => ({ task_id: c.task.id, lease_id: c.lease_id })),
          });
          if (!r.items.every((x) => x.ok)) throw new Error('a completion failed');
          return claims.length;
        },
      );
    }
    return await drain(
      (i) => mcp('claim_mesh_task', { agent_id: t.agents[i].id, mission_id: t.mission.id }),
      (_i, c) => mcp('complete_mesh_task', { task_id: c.task.id, lease_id: c.lease_id }),
    );
  } finally {
    await t.close();
  }
}

async function runGraphile() {
  const { run, makeWorkerUtils, Logger } = await import('graphile-worker');
  const quiet = new Logger(() => () => {});
  const s = await freshSchema('bq_gw');
  const preset = {
    worker: {
      connectionString: PG,
      schema: s.schema,
      concurrentJobs: C,
      localQueue: { size: 200 },
      completeJobBatchDelay: 0,
      failJobBatchDelay: 0,
      maxPoolSize: C + 4,
      pollInterval: 100,
    },
  };
  try {
    const utils = await makeWorkerUtils({ connectionString: PG, schema: s.schema, logger: quiet });
    await utils.migrate();
    for (let i = 0; i < N; i += 1000) {
      await utils.addJobs(
        Array.from({ length: Math.min(1000, N - i) }, () => ({ identifier: 'noop', payload: {} })),
      );
    }
    await utils.release();
    let done = 0;
    let finish;
    const all = new Promise((r) => {
      finish = r;
    });
    const t0 = performance.now();
    const runner = await run({
      preset,
      noHandleSignals: true,
      logger: quiet,
      taskList: {
        noop: async () => {
          if (++done === N) finish();
        },
      },
    });
    await all;
    const secs = (performance.now() - t0) / 1000;
    await runner.stop();
    return { done, perSec: done / secs, p50: Number.NaN, p99: Number.NaN };
  } finally {
    await s.drop();
  }
}

async function runPgBoss() {
  const { default: PgBoss } = await import('pg-boss');
  const schema = `bq_pb_${process.pid}_${Math.random().toString(36).slice(2, 8)}`;
  const boss = new PgBoss({ connectionString: PG, schema, max: C + 4, supervise: false, schedule: false });
  boss.on('error', () => {});
  await boss.start();
  try {
    await boss.createQueue('noop');
    for (let i = 0; i < N; i += 1000) {
      await boss.insert(Array.from({ length: Math.min(1000, N - i) }, () => ({ name: 'noop', data: {} })));
    }
    let done = 0;
    let finish;
    const all = new Promise((r) => {
      finish = r;
    });
    const t0 = performance.now();
    for (let w = 0; w < C; w++) {
      await boss.work('noop', { batchSize: 100, pollingIntervalSeconds: 0.5 }, async (jobs) => {
        done += jobs.length;
        if (done >= N) finish();
      });
    }
    await all;
    const secs = (performance.now() - t0) / 1000;
    return { done, perSec: done / secs, p50: Number.NaN, p99: Number.NaN };
  } finally {
    await boss.stop({ graceful: false, wait: true });
    await sql(`drop schema if exists "${schema}" cascade`);
  }
}

/** Claim latency (single claimer) with `history` completed tasks already in the table. */
async function claimLatency(history) {
  const t = await svcTower();
  try {
    if (history > 0) {
      const c = new pg.Client({ connectionString: PG });
      await c.connect();
      await c.query(`set search_path to "${t.schema}"`);
      await c.query(
        `insert into mesh_tasks (id, mission_id, domain_id, parent_id, title, description, claim_policy,
           priority, assigned_agent_id, required_capabilities, state, attempt, max_attempts,
           lease_seconds, claimed_by, result, failure_reason, created_at, updated_at)
         select 'mt_hist' || lpad(g::text, 10, '0'), $1, $2, null, 'old', '', 'first_claim', 0, null,
           '[]', 'completed', 1, 3, 60, $3, null, null, '2026-01-01T00:00:00.000Z', '2026-01-01T00:00:00.000Z'
         from generate_series(1, $4) g`,
        [t.mission.id, t.mission.domain_id, t.agents[0].id, history],
      );
      // Steady state, as a store that accumulated its history would be: the bulk insert's
      // visibility map, statistics and dirty pages settled before measuring.
      await c.query('vacuum analyze mesh_tasks');
      await c.query('checkpoint');
      await c.end();
    }
    await t.enqueue(LATENCY_CLAIMS);
    const lat = [];
    for (let i = 0; i < LATENCY_CLAIMS; i++) {
      const s = performance.now();
      const c = await t.mesh.claim(ADMIN, t.agents[0].id, t.mission.id);
      lat.push(performance.now() - s);
      await t.mesh.complete(ADMIN, c.task.id, c.lease_id, null);
    }
    lat.sort((a, b) => a - b);
    return { p50: percentile(lat, 50), p99: percentile(lat, 99) };
  } finally {
    await t.close();
  }
}

const RUNNERS = {
  svc: () => runSvc(false, false),
  'svc-batch': () => runSvc(false, true),
  'svc-http': () => runSvc(true, false),
  'svc-http-batch': () => runSvc(true, true),
  'graphile-worker': runGraphile,
  'pg-boss': runPgBoss,
};
const load = [loadavg()[0]];
const results = Object.fromEntries(PEERS.map((p) => [p, []]));
for (let r = 0; r < ROUNDS; r++) {
  for (const p of PEERS) {
    const res = await RUNNERS[p]();
    if (res.done !== N) throw new Error(`${p}: completed ${res.done} of ${N}`);
    results[p].push(res);
    console.log(
      `round ${r + 1} ${p}: ${res.perSec.toFixed(0)} tasks/s, claim p50 ${res.p50.toFixed(2)} ms p99 ${res.p99.toFixed(2)} ms`,
    );
  }
}
load.push(loadavg()[0]);
const med = (p, k) => median(results[p].map((x) => x[k]));
const ms = (v) => (Number.isNaN(v) ? '–' : v.toFixed(2));
const rows = PEERS.map(
  (p) => `| ${p} | ${med(p, 'perSec').toFixed(0)} | ${ms(med(p, 'p50'))} | ${ms(med(p, 'p99'))} |`,
);

const lat = [];
const p99s = [];
for (const h of HISTORY > 0 ? [0, HISTORY] : [0]) {
  const l = await claimLatency(h);
  p99s.push(l.p99);
  console.log(
    `claim latency with ${h} completed tasks: p50 ${l.p50.toFixed(2)} ms p99 ${l.p99.toFixed(2)} ms`,
  );
  lat.push(`| ${h.toLocaleString('en-US')} | ${l.p50.toFixed(2)} | ${l.p99.toFixed(2)} |`);
}

const ratio = (a, b) =>
  PEERS.includes(a) && PEERS.includes(b) ? (med(a, 'perSec') / med(b, 'perSec')).toFixed(3) : 'n/a';
const loadNote = `Load average (1 min) ${load[0].toFixed(1)} at the start of the throughput rounds, ${load[1].toFixed(1)} at their end, ${loadavg()[0].toFixed(1)} after the latency runs, on ${availableCores()} cores.`;
const verdict = `Ratios (throughput): svc / graphile-worker = ${ratio('svc', 'graphile-worker')},
svc-batch / graphile-worker = ${ratio('svc-batch', 'graphile-worker')} (target >= 1);
svc-http / graphile-worker = ${ratio('svc-http', 'graphile-worker')}, svc-http-batch / graphile-worker =
${ratio('svc-http-batch', 'graphile-worker')} (target >= 0.33). Claim p99 with
history / empty = ${p99s.length === 2 ? (p99s[1] / p99s[0]).toFixed(2) : 'n/a'} (target <= 1.5).`;
writeSection(
  'queue',
  `## Queue (bench/queue)

${today()}, ${machine()}. Command: \`npm run bench -- queue\` (BENCH_QUEUE_TASKS=${N},
BENCH_QUEUE_CONCURRENCY=${C}, BENCH_ROUNDS=${ROUNDS}). ${N} no-op tasks queued first, ${C}
concurrent claimers, claim + complete each, counted from the first claim to the last
completion; median of ${ROUNDS} rounds, peers alternating within each round; all on the same
local PostgreSQL server, each in a fresh schema, clients in the bench process.

- **svc**: the tower's queue layer in-process (\`MeshService.claim\` / \`complete\`): on
  PostgreSQL each claim is one statement (pick with \`FOR UPDATE SKIP LOCKED\`, update, append
  the \`matrix\` event), completes of concurrent claimers are coalesced into shared statements.
- **svc-batch**: the same, each claimer claiming up to ${BATCH} tasks per call
  (\`MeshService.claimMany\`, the \`claim_mesh_tasks\` tool) and completing them in one call
  (\`completeMany\`, \`complete_mesh_tasks\`): the counterpart of graphile-worker's local queue
  and batched completions.
- **svc-http**: the same through HTTP, \`POST /mcp/call\` \`claim_mesh_task\` /
  \`complete_mesh_task\` with a node JWT (fetch, keep-alive, client in the tower's process),
  rate limit off. **svc-http-batch**: \`claim_mesh_tasks\` with \`max: ${BATCH}\`, then the
  batch completed in one \`complete_mesh_tasks\` call.
- **graphile-worker 0.17**: \`localQueue.size = 200\`, \`completeJobBatchDelay: 0\`,
  \`failJobBatchDelay: 0\`, concurrency ${C}; jobs added with \`addJobs\`. No per-claim latency
  (claims are batched by the local queue).
- **pg-boss 10**: ${C} workers with \`batchSize: 100\`; jobs added with \`insert\`.

| peer | tasks/s | claim p50 ms | claim p99 ms |
|---|---|---|---|
${rows.join('\n')}

Claim latency as history grows (one claimer, ${LATENCY_CLAIMS} claims + completes, in-process,
completed tasks bulk-inserted first):

| completed tasks in store | claim p50 ms | claim p99 ms |
|---|---|---|
${lat.join('\n')}

${verdict}

${loadNote}
`,
);
process.exit(0);
