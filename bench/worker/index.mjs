// bench/worker: 1 000 no-op mesh tasks through one node (real tower + real svcd processes from
// dist/, SQLite store) with max_concurrent 3 and 8: tasks/s from the first submit to the last
// completion, and submit→start latency (task created_at → its `running` matrix event, both
// tower timestamps) p50/p99. The subagent is `true` (config.toml [runtime.alpha_code]), so the
// figures are the worker's own cost: claim, start, workdir, spawn, progress, complete.
import { execFile, spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { promisify } from 'node:util';
import { countChecks, exactlyOnce } from '../lib/counts.mjs';
import { machine, percentile, ROOT, today, writeSection } from '../lib/report.mjs';

const N = Number(process.env.BENCH_WORKER_TASKS ?? 1000);
const CONCURRENCY = (process.env.BENCH_WORKER_CONCURRENCY ?? '3,8').split(',').map(Number);
const SUBMITTERS = 8;
/** Tasks submitted one at a time to an idle loop: the wake-up path without a backlog. */
const IDLE = Number(process.env.BENCH_WORKER_IDLE_TASKS ?? 50);
const SVC = join(ROOT, 'dist/cli/svc.js');
const SVCD = join(ROOT, 'dist/cli/svcd.js');
const execFileP = promisify(execFile);
const sleepMs = (ms) => new Promise((r) => setTimeout(r, ms));
const procs = [];
/** Every task submitted ran once and completed once, or no figures are written. */
const checks = countChecks('worker');

function isolatedEnv(dir) {
  const env = {};
  for (const [k, v] of Object.entries(process.env)) {
    if (
      k.startsWith('SVC_') ||
      k.startsWith('XDG_') ||
      k === 'DBUS_SESSION_BUS_ADDRESS' ||
      k.startsWith('TMUX')
    )
      continue;
    env[k] = v;
  }
  const home = join(dir, 'home');
  return Object.assign(env, {
    HOME: join(dir, 'user'),
    SVC_HOME: home,
    SVC_NODE_FILE: join(home, 'node.json'),
  });
}

function start(bin, args, env) {
  const child = spawn(process.execPath, [bin, ...args], { env, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  child.stdout.on('data', (d) => {
    out += d;
  });
  child.stderr.on('data', (d) => {
    out += d;
  });
  const p = { child, output: () => out };
  procs.push(p);
  return p;
}

async function until(what, fn, timeoutMs = 60_000) {
  const deadline = performance.now() + timeoutMs;
  for (;;) {
    const v = await fn().catch(() => null);
    if (v) return v;
    if (performance.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleepMs(50);
  }
}

/** Reads /events/stream and calls onEvent(event) for each message. */
function follow(url, token, onEvent) {
  const abort = new AbortController();
  const done = (async () => {
    const res = await fetch(url, { headers: { authorization: `Bearer ${token}` }, signal: abort.signal });
    const decoder = new TextDecoder();
    let buf = '';
    for await (const chunk of res.body) {
      buf += decoder.decode(chunk, { stream: true });
      for (let i = buf.indexOf('\n\n'); i >= 0; i = buf.indexOf('\n\n')) {
        const block = buf.slice(0, i);
        buf = buf.slice(i + 2);
        const data = block
          .split('\n')
          .filter((l) => l.startsWith('data:'))
          .map((l) => l.slice(5).trimStart())
          .join('\n');
        if (data) onEvent(JSON.parse(data));
      }
    }
  })().catch(() => {});
  return { close: () => abort.abort(), done };
}

async function main() {
  const dir = mkdtempSync(join(tmpdir(), 'svc-bench-worker-'));
  const env = isolatedEnv(dir);
  mkdirSync(env.SVC_HOME, { recursive: true, mode: 0o700 });
  mkdirSync(env.HOME, { recursive: true, mode: 0o700 });
  const results = [];
  try {
    const tower = start(
      SVC,
      ['tower', 'serve', '--listen', '127.0.0.1:0', '--log-level', 'warn', '--rate-limit', '0'],
      env,
    );
    const url = await until('the tower', async () => /listening on (\S+)/.exec(tower.output())?.[1]);
    const cli = { ...env, SVC_BASE_URL: url };
    const svc = async (...args) =>
      (await execFileP(process.execPath, [SVC, '--json', ...args], { env: cli })).stdout;
    const admin = readFileSync(join(env.SVC_HOME, 'tower', 'admin.token'), 'utf8').trim();
    const domain = JSON.parse(await svc('domain', 'create', 'bench')).id;
    const mission = JSON.parse(await svc('mission', 'create', 'm', '--domain', domain)).id;
    await svc('agent', 'node', 'register', '--hostname', 'bench-node');
    mkdirSync(join(env.SVC_HOME, 'svcd'), { recursive: true, mode: 0o700 });
    writeFileSync(
      join(env.SVC_HOME, 'svcd', 'config.toml'),
      '[runtime.alpha_code]\ncommand = ["true"]\n\n[worker]\ncleanup = "always"\n',
    );
    const svcd = start(SVCD, ['run', '--backend-url', url, '--log-level', 'warn'], env);
    await until('svcd connected', async () => JSON.parse(await svc('daemon', 'status')).tower?.connected);

    for (const c of CONCURRENCY) {
      const created = new Map();
      const started = new Map();
      const completed = new Map();
      // Every task's transitions as the feed told them, for the count checks.
      const seen = { running: [], completed: [], failed: [] };
      const feed = follow(`${url}/events/stream?type=matrix&mission_id=${mission}`, admin, (e) => {
        const p = e.payload ?? {};
        if (p.entity !== 'mesh_task') return;
        const at = Date.parse(e.ts);
        seen[p.state]?.push(p.id);
        if (p.state === 'running' && !started.has(p.id)) started.set(p.id, at);
        if (p.state === 'completed') completed.set(p.id, at);
      });
      await svc('run', 'alpha_code', '--domain', domain, '--max-concurrent', String(c));
      const t0 = performance.now();
      let next = 0;
      const submitOne = async () => {
        while (next < N) {
          next++;
          const res = await fetch(`${url}/work/missions/${mission}/tasks`, {
            method: 'POST',
            headers: { authorization: `Bearer ${admin}`, 'content-type': 'application/json' },
            body: JSON.stringify({ title: `noop ${next}` }),
          });
          const t = await res.json();
          if (res.status !== 201) throw new Error(`submit failed: ${res.status} ${JSON.stringify(t)}`);
          created.set(t.id, Date.parse(t.created_at));
        }
      };
      await Promise.all(Array.from({ length: SUBMITTERS }, submitOne));
      const submitSeconds = (performance.now() - t0) / 1000;
      await until(
        `${N} completions`,
        async () => [...created.keys()].every((id) => completed.has(id)),
        10 * 60_000,
      );
      const elapsed = (performance.now() - t0) / 1000;
      // One at a time to the now idle loop: woken by task_ready, no queueing.
      const idle = [];
      const idleIds = new Set();
      for (let i = 0; i < IDLE; i++) {
        const res = await fetch(`${url}/work/missions/${mission}/tasks`, {
          method: 'POST',
          headers: { authorization: `Bearer ${admin}`, 'content-type': 'application/json' },
          body: JSON.stringify({ title: `idle ${i}` }),
        });
        const t = await res.json();
        if (res.status !== 201) throw new Error(`submit failed: ${res.status} ${JSON.stringify(t)}`);
        idleIds.add(t.id);
        await until('the idle task', async () => completed.has(t.id));
        idle.push(started.get(t.id) - Date.parse(t.created_at));
      }
      idle.sort((a, b) => a - b);
      // Each task submitted (batch and idle) started once and completed once; none failed,
      // none of another mission's. The idle phase gave late duplicates of the batch time to show.
      const what = `max_concurrent ${c}`;
      const mine = (ids, set) => ids.filter((id) => set.has(id));
      for (const [phase, set, n] of [
        ['batch', new Set(created.keys()), N],
        ['idle', idleIds, IDLE],
      ]) {
        exactlyOnce(checks, `${what}, ${phase}: tasks started`, mine(seen.running, set), n);
        exactlyOnce(checks, `${what}, ${phase}: tasks completed`, mine(seen.completed, set), n);
      }
      checks.exact(`${what}: tasks failed`, seen.failed.length, 0);
      checks.exact(
        `${what}: transitions of tasks not submitted by this run`,
        [...seen.running, ...seen.completed].filter((id) => !created.has(id) && !idleIds.has(id)).length,
        0,
      );
      feed.close();
      await svc('worker', 'stop');
      const lat = [...created].map(([id, at]) => started.get(id) - at).sort((a, b) => a - b);
      const first = Math.min(...created.values());
      const last = Math.max(...[...created.keys()].map((id) => completed.get(id)));
      results.push({
        c,
        tasksPerSecond: N / ((last - first) / 1000),
        wall: elapsed,
        submitSeconds,
        p50: percentile(lat, 50),
        p99: percentile(lat, 99),
        max: lat[lat.length - 1],
        idle50: percentile(idle, 50),
        idle99: percentile(idle, 99),
      });
      console.log(JSON.stringify(results[results.length - 1]));
    }
    svcd.child.kill('SIGTERM');
  } finally {
    for (const p of procs) p.child.kill('SIGTERM');
    await sleepMs(500);
    rmSync(dir, { recursive: true, force: true });
  }
  checks.orExit();
  const rows = results
    .map(
      (r) =>
        `| ${r.c} | ${r.tasksPerSecond.toFixed(1)} | ${r.p50.toFixed(0)} | ${r.p99.toFixed(0)} | ${r.max.toFixed(0)} | ${r.submitSeconds.toFixed(1)} | ${r.idle50.toFixed(0)} | ${r.idle99.toFixed(0)} |`,
    )
    .join('\n');
  writeSection(
    'worker',
    `## worker — ${N} no-op mesh tasks through one node

${today()}, ${machine()}. \`npm run build && npm run bench -- worker\` (\`BENCH_WORKER_TASKS\`,
\`BENCH_WORKER_CONCURRENCY\`). Real \`svc tower serve\` (SQLite, rate limit off) and \`svcd run\`
processes; one work loop (\`svc run alpha_code --max-concurrent C\`) whose subagent command is
\`true\`, so the figures are the worker's own cost per task: claim, start, working directory,
process group spawn, a progress report, complete, directory removal (5–6 tower calls). ${SUBMITTERS}
clients submit the ${N} tasks over REST while the loop drains them. tasks/s: first \`created_at\`
to last \`completed\` matrix event; submit→start: a task's \`created_at\` to its \`running\` matrix
event (both tower timestamps). Counts are checked, or nothing is written: every task submitted
started once and completed once (its \`running\` and \`completed\` matrix events), none failed.

| max_concurrent | tasks/s | submit→start p50 (ms) | p99 (ms) | max (ms) | submit phase (s) | idle submit→start p50 (ms) | idle p99 (ms) |
|---:|---:|---:|---:|---:|---:|---:|---:|
${rows}

The batch latencies include queueing: tasks are submitted faster than one node runs them, so a
task waits for a free slot and p50/p99 grow with the backlog. The idle columns are the wake-up
path alone: ${IDLE} tasks submitted one at a time to the idle loop (woken by \`task_ready\`).`,
    [
      {
        peer: '–',
        target: '–',
        result: `${results.map((r) => `${r.tasksPerSecond.toFixed(1)} tasks/s at max_concurrent ${r.c}`).join(', ')}; idle submit→start p50 ${results.map((r) => r.idle50.toFixed(0)).join(' / ')} ms; every task run and completed once`,
        met: '–',
      },
    ],
  );
}

await main();
