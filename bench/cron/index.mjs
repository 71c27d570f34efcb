#!/usr/bin/env node
// npm run bench -- cron: svcd's cron tick with many jobs. Measures the lag from the minute
// boundary to the start of each dispatch (p50/p99) and the CPU spent per tick, at 1 000 and
// 5 000 jobs, plus bash dispatch (boundary → the job's first instruction) and, as the peer
// in the same run, croner's own in-process scheduler firing 1 000 callbacks.
//
// Method: the real component (dist/) with a real state.db on disk (WAL, synchronous=FULL),
// driven by a *compressed* clock: a scaled minute lasts 60/k real seconds. Processing is
// real; only the idle wait between boundaries is shortened, so lags are reported in real ms.
// Signal dispatch goes to a no-op stand-in (the supervisor is not part of this benchmark);
// events go to a no-op outbox.
import { execSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { cpus, tmpdir, totalmem } from 'node:os';
import { join } from 'node:path';
import { Cron } from 'croner';
import { parseCronConfig } from '../../dist/daemon/cron/config.js';
import { createCron } from '../../dist/daemon/cron/cron.js';
import { dueJobs } from '../../dist/daemon/cron/due-jobs.js';
import { daemonPaths } from '../../dist/daemon/paths.js';
import { openStateStore } from '../../dist/daemon/state/store.js';
import { silentLogger } from '../../dist/lib/log.js';

const MIN = 60_000;
const TZ = 'Europe/Berlin';

function pct(xs, p) {
  if (xs.length === 0) return NaN;
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))];
}
const ms = (x) => (Number.isNaN(x) ? '-' : x.toFixed(1));

/** A clock whose minutes last 60/k real seconds; timers are real timers, shortened by k. */
function compressedClock(k, startMs) {
  const r0 = performance.now();
  const epoch0 = Date.now();
  const clock = {
    now: () => Math.floor(startMs + (performance.now() - r0) * k),
    setTimeout(fn, delay) {
      const t = setTimeout(fn, delay / k);
      return { cancel: () => clearTimeout(t) };
    },
    sleep: (delay) => new Promise((r) => setTimeout(r, delay / k)),
    /** Real epoch ms at which the scaled instant m happens. */
    realAt: (m) => epoch0 + (m - startMs) / k,
  };
  return clock;
}

function jobsToml(n, kind) {
  const out = [`timezone = "${TZ}"\n`];
  for (let i = 0; i < n; i++) {
    let schedule;
    if (kind === 'every-minute') schedule = '* * * * *';
    else {
      // A mix like a real node's: a few frequent jobs, many hourly and daily ones.
      const r = i % 50;
      schedule =
        r === 0
          ? '* * * * *'
          : r < 10
            ? `*/${5 + (i % 10)} * * * *`
            : r < 35
              ? `${i % 60} * * * *`
              : `${i % 60} ${i % 24} * * *`;
    }
    out.push(
      `[[job]]\nname = "job-${i}"\nschedule = "${schedule}"\nsession = "agent-${i % 20}"\nprompt = "tick"\n`,
    );
  }
  return out.join('\n');
}

async function runComponent({ label, n, kind, k, ticks, bash = false }) {
  const home = mkdtempSync(join(tmpdir(), 'svc-bench-cron-'));
  const paths = daemonPaths(home);
  mkdirSync(paths.svcdDir, { recursive: true });
  const marks = join(home, 'marks');
  let toml;
  if (bash) {
    toml = [`timezone = "${TZ}"\n`];
    for (let i = 0; i < n; i++) {
      toml.push(
        `[[job]]\nname = "bash-${i}"\nschedule = "* * * * *"\ndispatch = "bash"\nprompt = 'echo "$SVC_CRON_SCHEDULED_MINUTE $EPOCHREALTIME" >> ${marks}'\n`,
      );
    }
    toml = toml.join('\n');
  } else {
    toml = jobsToml(n, kind);
  }
  writeFileSync(paths.cronToml, toml);
  // Start 2 scaled seconds after a boundary so the start-up tick is measured apart.
  const start = Date.UTC(2031, 0, 6, 10, 0, 2);
  const clock = compressedClock(k, start);
  const state = openStateStore(paths.stateDb, clock);
  const lags = [];
  const firstLags = [];
  const perTick = new Map();
  let dispatches = 0;
  const ctx = {
    clock,
    log: silentLogger(),
    paths,
    identity: { node_id: 'node_bench', hostname: 'bench', backend_url: 'http://127.0.0.1:9', jwt: 'x' },
    env: { PATH: process.env.PATH, HOME: home },
    state,
    tower: { baseUrl: 'http://127.0.0.1:9', request: async () => undefined },
    events: { publish: async () => {} },
    mgmt: { register() {} },
    shutdown: new AbortController().signal,
  };
  const cron = createCron(ctx, {
    signal: async () => {
      const now = clock.now();
      const minute = Math.floor(now / MIN) * MIN;
      if (minute === start - 2000) return; // the start-up tick, not a boundary
      const lag = (now - minute) / k;
      lags.push(lag);
      dispatches++;
      if (!perTick.has(minute)) {
        perTick.set(minute, true);
        firstLags.push(lag);
      }
    },
  });
  await cron.start();
  await cron.idle();
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  await new Promise((r) => setTimeout(r, (ticks * MIN) / k - 1000 / k));
  await cron.idle();
  const cpu = process.cpuUsage(cpu0);
  const wall = performance.now() - t0;
  await cron.stop();
  await state.close();
  if (bash) {
    for (const line of readFileSync(marks, 'utf8').trim().split('\n')) {
      const [minute, real] = line.split(' ');
      const m = Date.parse(minute);
      if (m === start - 2000) continue;
      lags.push(Number(real) * 1000 - clock.realAt(m));
      dispatches++;
    }
  }
  rmSync(home, { recursive: true, force: true });
  const cpuMs = (cpu.user + cpu.system) / 1000;
  return {
    label,
    jobs: n,
    ticks,
    dispatches,
    p50: pct(lags, 50),
    p99: pct(lags, 99),
    max: Math.max(...lags),
    firstP50: pct(firstLags, 50),
    cpuPerTick: cpuMs / ticks,
    wall,
  };
}

function runDecision(n, kind) {
  const jobs = parseCronConfig(jobsToml(n, kind), 'bench.toml').jobs;
  const heartbeats = new Map();
  const running = new Set();
  let minute = Date.UTC(2031, 0, 6, 10, 0);
  // Warm the per-zone offset cache and the JIT, then measure.
  for (let i = 0; i < 20; i++, minute += MIN)
    dueJobs({ jobs, minute, lastTick: minute - MIN, heartbeats, running });
  const rounds = 200;
  const c0 = process.cpuUsage();
  const t0 = performance.now();
  let due = 0;
  for (let i = 0; i < rounds; i++, minute += MIN) {
    due += dueJobs({ jobs, minute, lastTick: minute - MIN, heartbeats, running }).length;
  }
  const c = process.cpuUsage(c0);
  return {
    n,
    kind,
    usWall: ((performance.now() - t0) * 1000) / rounds,
    usCpu: (c.user + c.system) / rounds,
    duePerTick: due / rounds,
  };
}

async function runCronerPeer(n, seconds) {
  const lags = [];
  const jobs = [];
  for (let i = 0; i < n; i++) {
    jobs.push(
      new Cron('* * * * * *', { timezone: TZ }, () => {
        const now = Date.now();
        lags.push(now - Math.floor(now / 1000) * 1000);
      }),
    );
  }
  const cpu0 = process.cpuUsage();
  await new Promise((r) => setTimeout(r, seconds * 1000));
  const cpu = process.cpuUsage(cpu0);
  for (const j of jobs) j.stop();
  return {
    n,
    seconds,
    fires: lags.length,
    p50: pct(lags, 50),
    p99: pct(lags, 99),
    cpuPerTick: (cpu.user + cpu.system) / 1000 / seconds,
  };
}

const machine = `${cpus().length} × ${cpus()[0]?.model ?? 'cpu'}, ${Math.round(totalmem() / 2 ** 30)} GiB, Node ${process.version}, load ${execSync('cat /proc/loadavg').toString().split(' ').slice(0, 3).join(' ')}`;
console.log(`machine: ${machine}`);

const decisions = [runDecision(1000, 'every-minute'), runDecision(1000, 'mixed'), runDecision(5000, 'mixed')];
const runs = [];
runs.push(
  await runComponent({
    label: '1 000 jobs, all due every minute',
    n: 1000,
    kind: 'every-minute',
    k: 20,
    ticks: 12,
  }),
);
runs.push(
  await runComponent({ label: '1 000 jobs, mixed schedules', n: 1000, kind: 'mixed', k: 30, ticks: 20 }),
);
runs.push(
  await runComponent({
    label: '5 000 jobs, all due every minute',
    n: 5000,
    kind: 'every-minute',
    k: 6,
    ticks: 6,
  }),
);
runs.push(
  await runComponent({ label: '5 000 jobs, mixed schedules', n: 5000, kind: 'mixed', k: 30, ticks: 20 }),
);
runs.push(
  await runComponent({
    label: '100 bash jobs, all due every minute',
    n: 100,
    kind: 'every-minute',
    k: 20,
    ticks: 8,
    bash: true,
  }),
);
const peer = await runCronerPeer(1000, 10);

const lines = [];
lines.push(
  '| scenario | dispatches | lag p50 (ms) | lag p99 (ms) | lag max (ms) | first dispatch p50 (ms) | CPU per tick (ms) |',
);
lines.push('|---|---:|---:|---:|---:|---:|---:|');
for (const r of runs) {
  lines.push(
    `| ${r.label} | ${r.dispatches} | ${ms(r.p50)} | ${ms(r.p99)} | ${ms(r.max)} | ${ms(r.firstP50)} | ${ms(r.cpuPerTick)} |`,
  );
}
lines.push(
  `| peer: croner 11, ${peer.n} in-process jobs firing every second, ${peer.seconds} s | ${peer.fires} | ${ms(peer.p50)} | ${ms(peer.p99)} | - | - | ${ms(peer.cpuPerTick)} |`,
);
lines.push('');
lines.push('| decision only (due-jobs.ts, pure) | µs wall per tick | µs CPU per tick | due per tick |');
lines.push('|---|---:|---:|---:|');
for (const d of decisions)
  lines.push(
    `| ${d.n} jobs, ${d.kind} | ${d.usWall.toFixed(0)} | ${d.usCpu.toFixed(0)} | ${d.duePerTick.toFixed(1)} |`,
  );
console.log(lines.join('\n'));
