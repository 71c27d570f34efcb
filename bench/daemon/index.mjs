// bench/daemon: the idle cost of svcd: USS, RSS, CPU and wake-ups over a window (default 5 min,
// BENCH_DURATION_S), with 0 and BENCH_AGENTS (default 20) supervised `sleep` agents, beside
// pm2 6's daemon supervising the same processes, all four measured in the same window so they
// share the machine's load. Everything is read from /proc (the measured processes are never
// asked anything during the window, so the measurement adds no wake-ups of its own).
// Needs the build (npm run build).
import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import os from 'node:os';
import { join } from 'node:path';
import { MgmtClient } from '../../dist/cli/mgmt-client.js';
import { SVCD_NODE_FLAGS } from '../../dist/cli/svcd-launch.js';
import { machine, median, met, ROOT, today, writeSection } from '../lib/report.mjs';

const DURATION_S = Number(process.env.BENCH_DURATION_S ?? 300);
const AGENTS = Number(process.env.BENCH_AGENTS ?? 20);
const SAMPLE_S = Number(process.env.BENCH_SAMPLE_S ?? 5);
const SETTLE_S = Number(process.env.BENCH_SETTLE_S ?? 15);
// Targets, for svcd with AGENTS agents against pm2 6's daemon with the same: private memory
// (USS) below pm2's, RSS at most 10 % above pm2's, CPU below 0.5 % of one core.
const TARGET_RSS_RATIO = 1.1;
const TARGET_CPU_PCT = 0.5;
const SVC = join(ROOT, 'dist', 'cli', 'svc.js');
const SVCD = join(ROOT, 'dist', 'cli', 'svcd.js');
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const CLK_TCK = 100; // USER_HZ on Linux: /proc/<pid>/stat times are in 1/100 s

const children = [];
function start(bin, args, env, nodeFlags = []) {
  const p = spawn(process.execPath, [...nodeFlags, bin, ...args], { env, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  p.stdout.on('data', (d) => {
    out += d;
  });
  p.stderr.on('data', (d) => {
    out += d;
  });
  p.output = () => out;
  children.push(p);
  return p;
}

async function until(what, fn, timeoutMs = 60_000) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      const v = await fn();
      if (v) return v;
    } catch {}
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(100);
  }
}

function runCli(args, env) {
  return new Promise((resolve, reject) => {
    const p = start(SVC, args, env);
    p.once('exit', (code) =>
      code === 0 ? resolve(p.output()) : reject(new Error(`svc ${args.join(' ')}: ${p.output()}`)),
    );
  });
}

// ---- /proc readings --------------------------------------------------------------------------

/**
 * CPU time in seconds, summed over the process's threads from /proc/<pid>/task/<tid>/schedstat
 * (nanoseconds on the CPU). utime + stime from /proc/<pid>/stat count in 10 ms ticks: an idle
 * daemon uses 3–4 ticks in 5 minutes, so ticks cannot tell 0.010 % from 0.013 %. Falls back to
 * the ticks when schedstat is missing (kernels without CONFIG_SCHED_INFO).
 */
function cpuSeconds(pid) {
  let ns = 0;
  let read = 0;
  for (const tid of readdirSync(`/proc/${pid}/task`)) {
    try {
      ns += Number(readFileSync(`/proc/${pid}/task/${tid}/schedstat`, 'utf8').split(' ')[0]);
      read++;
    } catch {}
  }
  if (read > 0) return ns / 1e9;
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(f[11]) + Number(f[12])) / CLK_TCK; // utime + stime (fields 14, 15)
}

function rssMiB(pid) {
  const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return Number(m[1]) / 1024;
}

/**
 * USS, the memory only this process holds (freed if it exited): Private_Clean + Private_Dirty
 * (+ Private_Hugetlb) from /proc/<pid>/smaps_rollup. The rest of RSS is pages shared with other
 * processes, mostly the node binary's code, which every Node.js process on the machine maps.
 */
function ussMiB(pid) {
  const text = readFileSync(`/proc/${pid}/smaps_rollup`, 'utf8');
  let kb = 0;
  for (const field of ['Private_Clean', 'Private_Dirty', 'Private_Hugetlb']) {
    const m = new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(text);
    if (m) kb += Number(m[1]);
  }
  return kb / 1024;
}

/** Context switches of every thread: each is a wake-up of that thread. */
function switches(pid) {
  let n = 0;
  for (const tid of readdirSync(`/proc/${pid}/task`)) {
    try {
      const s = readFileSync(`/proc/${pid}/task/${tid}/status`, 'utf8');
      n += Number(/voluntary_ctxt_switches:\s+(\d+)/.exec(s)[1]);
      n += Number(/nonvoluntary_ctxt_switches:\s+(\d+)/.exec(s)[1]);
    } catch {}
  }
  return n;
}

async function measure(subjects) {
  const t0 = Date.now();
  const first = subjects.map((s) => ({
    cpu: cpuSeconds(s.pid),
    sw: switches(s.pid),
    rss: [rssMiB(s.pid)],
    uss: [ussMiB(s.pid)],
  }));
  const load = [os.loadavg()];
  const end = t0 + DURATION_S * 1000;
  while (Date.now() < end) {
    await sleep(Math.min(SAMPLE_S * 1000, end - Date.now()));
    for (const [i, s] of subjects.entries()) {
      first[i].rss.push(rssMiB(s.pid));
      first[i].uss.push(ussMiB(s.pid));
    }
    load.push(os.loadavg());
  }
  const wall = (Date.now() - t0) / 1000;
  return {
    wall,
    load,
    rows: subjects.map((s, i) => {
      const r = first[i];
      return {
        name: s.name,
        agents: s.agents,
        rssMedian: median(r.rss),
        rssMax: Math.max(...r.rss),
        cpuPct: ((cpuSeconds(s.pid) - r.cpu) / wall) * 100,
        wakeups: (switches(s.pid) - r.sw) / wall,
        ussMedian: median(r.uss),
        ussMax: Math.max(...r.uss),
      };
    }),
  };
}

// ---- svcd ------------------------------------------------------------------------------------

function agentsToml(n) {
  let s = '';
  for (let i = 0; i < n; i++) {
    s += `[[agent]]\nid = "s${String(i).padStart(2, '0')}"\nruntime = "alpha_code"\nsupervise = true\nbackend = "process"\ncommand = ["sleep", "86400"]\n\n`;
  }
  return s;
}

async function startSvcd(base, tower, token, name, n, nodeFlags = SVCD_NODE_FLAGS) {
  const home = join(base, name);
  mkdirSync(join(home, 'svcd'), { recursive: true, mode: 0o700 });
  writeFileSync(join(home, 'svcd', 'agents.toml'), agentsToml(n));
  const env = {
    PATH: process.env.PATH,
    HOME: base,
    SVC_HOME: home,
    SVC_NODE_FILE: join(home, 'node.json'),
    SVC_BASE_URL: tower,
    SVC_TOKEN: token,
  };
  await runCli(['agent', 'node', 'register', '--hostname', name], env);
  // As svc daemon up and the systemd unit start it.
  const p = start(SVCD, ['run', '--log-level', 'warn'], env, nodeFlags);
  const sock = join(home, 'svcd', 'mgmt.sock');
  const call = async (method) => {
    const c = await MgmtClient.connect(sock);
    try {
      return await c.call(method);
    } finally {
      c.close();
    }
  };
  await until(`${name} connected`, async () => (await call('daemon.status')).tower.connected);
  await until(`${name} running ${n} agents`, async () => {
    const list = await call('agent.list');
    const items = Array.isArray(list) ? list : list.items;
    return items.filter((a) => a.state === 'running' || a.status === 'running').length === n;
  });
  return { name: nodeFlags.length ? `svcd` : 'svcd, default V8 flags', agents: n, pid: p.pid };
}

// ---- pm2 -------------------------------------------------------------------------------------

const require = createRequire(import.meta.url);
const pm2Call = (pm2, method, ...args) =>
  new Promise((resolve, reject) => pm2[method](...args, (e, r) => (e ? reject(e) : resolve(r))));

async function startPm2(base, name, n) {
  const pm2mod = require('pm2');
  const home = join(base, name);
  mkdirSync(home, { recursive: true });
  process.env.PM2_HOME = home;
  const pm2 = new pm2mod.custom({ pm2_home: home, daemon_mode: true });
  await pm2Call(pm2, 'connect');
  for (let i = 0; i < n; i++) {
    await pm2Call(pm2, 'start', {
      name: `s${i}`,
      script: 'sleep',
      args: ['86400'],
      interpreter: 'none',
      autorestart: true,
    });
  }
  await until(`pm2 ${name} running ${n}`, async () => {
    const list = await pm2Call(pm2, 'list');
    return list.filter((p) => p.pm2_env.status === 'online').length === n;
  });
  const pid = Number(readFileSync(join(home, 'pm2.pid'), 'utf8'));
  // Leave the daemon alone during the window: no client connected.
  await pm2Call(pm2, 'disconnect');
  return {
    name: 'pm2 6 daemon',
    agents: n,
    pid,
    async stop() {
      process.env.PM2_HOME = home;
      const c = new pm2mod.custom({ pm2_home: home, daemon_mode: true });
      await pm2Call(c, 'connect');
      await pm2Call(c, 'kill').catch(() => {});
      await pm2Call(c, 'disconnect').catch(() => {});
    },
  };
}

// ---- run -------------------------------------------------------------------------------------

const base = mkdtempSync(join(os.tmpdir(), 'bench-daemon-'));
const cleanup = [];
try {
  const towerHome = join(base, 'tower-home');
  const towerEnv = { PATH: process.env.PATH, HOME: base, SVC_HOME: towerHome };
  const tower = start(SVC, ['tower', 'serve', '--listen', '127.0.0.1:0', '--log-level', 'warn'], towerEnv);
  const url = await until('tower', () => /listening on (\S+)/.exec(tower.output())?.[1]);
  const token = readFileSync(join(towerHome, 'tower', 'admin.token'), 'utf8').trim();

  const subjects = [];
  subjects.push(await startSvcd(base, url, token, 'svcd-0', 0));
  subjects.push(await startSvcd(base, url, token, `svcd-${AGENTS}`, AGENTS));
  // The same without SVCD_NODE_FLAGS: what they save.
  subjects.push(await startSvcd(base, url, token, `svcd-${AGENTS}-v8-defaults`, AGENTS, []));
  for (const n of [0, AGENTS]) {
    const p = await startPm2(base, `pm2-${n}`, n);
    cleanup.push(() => p.stop());
    subjects.push(p);
  }
  console.log(`settling ${SETTLE_S} s, then measuring ${DURATION_S} s (sample every ${SAMPLE_S} s)`);
  await sleep(SETTLE_S * 1000);
  const r = await measure(subjects);

  const f1 = (x) => x.toFixed(1);
  const f2 = (x) => x.toFixed(2);
  const f3 = (x) => x.toFixed(3);
  const loads = r.load.map((l) => l[0]);
  const loadText = `load average (1 min) ${f2(loads[0])} at the start, ${f2(loads.at(-1))} at the end, median ${f2(median(loads))}`;
  const table = [
    '| daemon | supervised | USS median (MiB) | USS max (MiB) | RSS median (MiB) | RSS max (MiB) | CPU (% of one core) | wake-ups/s |',
    '| --- | --- | --- | --- | --- | --- | --- | --- |',
    ...r.rows.map(
      (x) =>
        `| ${x.name} | ${x.agents} | ${f1(x.ussMedian)} | ${f1(x.ussMax)} | ${f1(x.rssMedian)} | ${f1(x.rssMax)} | ${f3(x.cpuPct)} | ${f1(x.wakeups)} |`,
    ),
  ];
  const svcdN = r.rows.find((x) => x.name === 'svcd' && x.agents === AGENTS);
  const pm2N = r.rows.find((x) => x.name.startsWith('pm2') && x.agents === AGENTS);
  const said = (ok) => (ok ? 'met' : 'NOT met');
  const ussRatio = svcdN.ussMedian / pm2N.ussMedian;
  const rssRatio = svcdN.rssMedian / pm2N.rssMedian;
  const ussOk = svcdN.ussMedian < pm2N.ussMedian;
  const rssOk = rssRatio <= TARGET_RSS_RATIO;
  const cpuOk = svcdN.cpuPct < TARGET_CPU_PCT;
  const verdict = [
    `svcd with ${AGENTS} agents vs pm2 with ${AGENTS}, medians: ` +
      `USS ${f1(svcdN.ussMedian)} vs ${f1(pm2N.ussMedian)} MiB, ${f2(ussRatio)}× (target below pm2's: ${said(ussOk)}); ` +
      `RSS ${f1(svcdN.rssMedian)} vs ${f1(pm2N.rssMedian)} MiB, ${f2(rssRatio)}× (target within 10 %: ${said(rssOk)}); ` +
      `CPU ${f3(svcdN.cpuPct)} vs ${f3(pm2N.cpuPct)} % (target < ${TARGET_CPU_PCT} %: ${said(cpuOk)}).`,
  ];
  const rows = [
    {
      peer: 'pm2 6 daemon',
      target: `svcd with ${AGENTS} agents: USS below pm2's, RSS within 10 % of pm2's, CPU < ${TARGET_CPU_PCT} % of a core`,
      result: `USS ${f1(svcdN.ussMedian)} MiB (pm2 ${f1(pm2N.ussMedian)}: ${f2(ussRatio)}x), RSS ${f1(svcdN.rssMedian)} MiB (pm2 ${f1(pm2N.rssMedian)}: ${f2(rssRatio)}x), CPU ${f3(svcdN.cpuPct)} % (pm2 ${f3(pm2N.cpuPct)} %)`,
      met: met(ussOk && rssOk && cpuOk),
    },
  ];
  console.log(table.join('\n'));
  console.log(loadText);
  console.log(verdict.join('\n'));
  writeSection(
    'daemon',
    `## daemon — idle svcd vs pm2 6's daemon (USS, RSS, CPU, wake-ups)

${today()}, ${machine()}. \`npm run build && BENCH_DURATION_S=${DURATION_S} npm run bench -- daemon\` (BENCH_AGENTS=${AGENTS}, sample every ${SAMPLE_S} s, after ${SETTLE_S} s of settling). Window ${f1(r.wall)} s; ${loadText}.

Method: one tower (\`svc tower serve\`, SQLite) and four daemons measured over the same window, so
they share the machine's load: svcd with 0 and ${AGENTS} supervised agents (\`agents.toml\`,
\`alpha_code\` with \`command = ["sleep", "86400"]\`, process backend, default watchdog/cron
config, control channel connected to the tower; started with \`${SVCD_NODE_FLAGS.join(' ')}\` as
\`svc daemon up\` and the unit do, and once more without it), and pm2 6's God daemon with 0 and ${AGENTS}
\`sleep 86400\` processes (\`interpreter: "none"\`, autorestart, defaults otherwise; its client
disconnected before the window). Read from \`/proc\` only, never by asking the daemons, sampled
every ${SAMPLE_S} s: USS (private memory, \`Private_Clean + Private_Dirty\` of
\`/proc/<pid>/smaps_rollup\`: what the machine gets back when the daemon exits), RSS (\`VmRSS\`:
USS plus pages shared with other processes, mostly the node binary's code); CPU (time on the
CPU of all threads over the window, from \`/proc/<pid>/task/*/schedstat\` in nanoseconds: utime +
stime count 10 ms ticks, too coarse for an idle daemon), wake-ups (context switches of all
threads per second). The supervised processes themselves are not counted.
Targets for svcd with ${AGENTS} agents: USS below pm2's with ${AGENTS}, RSS within 10 % of it,
CPU below ${TARGET_CPU_PCT} % of one core.

${table.join('\n')}

${verdict.join('\n')}
`,
    rows,
  );
} finally {
  for (const c of cleanup) await c().catch(() => {});
  // svcd stops its agents on SIGTERM (each per its stop policy) before it exits: wait for that,
  // or a SIGKILL would leave its `sleep` agents behind.
  const alive = () => children.filter((p) => p.exitCode === null && p.signalCode === null);
  for (const p of alive()) p.kill('SIGTERM');
  await until('the daemons to stop', () => alive().length === 0, 60_000).catch(() => {});
  for (const p of alive()) p.kill('SIGKILL');
  rmSync(base, { recursive: true, force: true });
}
// pm2's client module keeps handles open after disconnect: end the bench explicitly.
process.exit(process.exitCode ?? 0);
