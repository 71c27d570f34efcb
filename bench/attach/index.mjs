// bench/attach: throughput of 100 MiB of PTY output read by a viewer through the tower vs the
// same PTY read locally over svcd.sock (and vs node-pty read directly, no svcd), and keystroke
// echo round trip through the tower on loopback, alone and while another viewer floods output.
// Real processes from the build: `svc tower serve`, `svcd run` (npm run build first).
import { spawn, spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os, { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import * as nodePty from '@lydell/node-pty';
import WebSocket from 'ws';
import { countChecks } from '../lib/counts.mjs';
import { machine, median, met, percentile, ROOT, today, writeSection } from '../lib/report.mjs';

const MIB = Number(process.env.BENCH_ATTACH_MIB ?? 100);
const RUNS = Number(process.env.BENCH_ATTACH_RUNS ?? 3);
const ECHOES = Number(process.env.BENCH_ATTACH_ECHOES ?? 300);
const load = () =>
  os
    .loadavg()
    .map((x) => x.toFixed(1))
    .join(' / ');
const SVC = join(ROOT, 'dist/cli/svc.js');
const SVCD = join(ROOT, 'dist/cli/svcd.js');
const sleepMs = (ms) => new Promise((r) => setTimeout(r, ms));
/** Every byte of every flood arrived exactly once, or no figures are written. */
const checks = countChecks('attach');

/**
 * Counts the bytes `x` in a chunk of terminal output: a flood is nearly all `x`, so a chunk
 * that equals as many `x` (one native compare) is counted whole and only the others are
 * walked byte by byte, so counting costs the viewer almost nothing.
 */
const XS = Buffer.alloc(1 << 20, 'x');
function countX(chunk) {
  if (chunk.length <= XS.length && chunk.equals(XS.subarray(0, chunk.length))) return chunk.length;
  let n = 0;
  for (let i = 0; i < chunk.length; i++) if (chunk[i] === 0x78) n++;
  return n;
}

const tmp = mkdtempSync(join(tmpdir(), 'bench-attach-'));
const home = join(tmp, 'home');
mkdirSync(join(home, 'svcd'), { recursive: true, mode: 0o700 });
const env = { ...process.env, HOME: tmp, SVC_HOME: home, SVC_NODE_FILE: join(home, 'node.json') };
for (const k of Object.keys(env)) if (k.startsWith('XDG_') || k === 'DBUS_SESSION_BUS_ADDRESS') delete env[k];
delete env.SVC_BASE_URL;
delete env.SVC_TOKEN;
const children = [];
let cleaned = false;
function cleanup() {
  if (cleaned) return;
  cleaned = true;
  for (const c of children) if (c.exitCode === null) c.kill('SIGTERM');
}
// Killed or interrupted: never leave a tower or svcd (and its agents) behind.
for (const sig of ['SIGINT', 'SIGTERM', 'SIGHUP']) {
  process.once(sig, () => {
    cleanup();
    setTimeout(() => {
      for (const c of children) if (c.exitCode === null) c.kill('SIGKILL');
      rmSync(tmp, { recursive: true, force: true });
      process.exit(130);
    }, 1000);
  });
}

/** Peak RSS (MiB) of the given pids while fn runs. */
async function peakRss(pids, fn) {
  const peak = Object.fromEntries(pids.map((p) => [p, 0]));
  const sample = () => {
    for (const p of pids) {
      try {
        const kb = Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${p}/status`, 'utf8'))?.[1] ?? 0);
        peak[p] = Math.max(peak[p], kb / 1024);
      } catch {}
    }
  };
  const t = setInterval(sample, 100);
  try {
    const r = await fn();
    sample();
    return { r, peak };
  } finally {
    clearInterval(t);
  }
}

async function until(what, fn, timeoutMs = 60_000) {
  const deadline = performance.now() + timeoutMs;
  for (;;) {
    const v = await fn();
    if (v) return v;
    if (performance.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleepMs(20);
  }
}

function start(bin, args, e) {
  const p = spawn(process.execPath, [bin, ...args], { env: e, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  p.stdout.on('data', (d) => {
    out += d;
  });
  p.stderr.on('data', (d) => {
    out += d;
  });
  children.push(p);
  return { p, out: () => out };
}

// The end marker differs per flood: the next viewer's screen snapshot still shows the last one.
let floods = 0;
// The command starts with a token of its own: counting starts at its echo, after the rest of
// the viewer's screen snapshot (through the tower a snapshot with scrollback spans several
// frames, and the previous flood's x's in it are not this flood's).
const FLOOD = (mib, n) =>
  `: START-${n}; head -c ${mib * 1048576} /dev/zero | tr "\\0" "x"; echo; echo DONE-$((6*7))-${n}\r`;

/** Opens a viewer and resolves once its screen snapshot arrived; fails on an error frame. */
async function openViewer(url, headers) {
  const ws = new WebSocket(url, { headers });
  ws.on('message', (d, bin) => {
    if (!bin) console.error(`control frame: ${d}`);
  });
  await new Promise((resolve, reject) => {
    ws.once('open', resolve);
    ws.once('error', reject);
  });
  await new Promise((resolve, reject) => {
    ws.once('message', (_d, bin) => (bin ? resolve() : reject(new Error('refused'))));
    ws.once('close', (code, why) => reject(new Error(`closed ${code} ${why}`)));
  });
  ws.on('close', (code, why) => {
    if (code !== 1000 && code !== 1005) console.error(`viewer closed: ${code} ${why}`);
  });
  return ws;
}

/**
 * Floods MIB through a viewer: MiB/s from sending the command to the end marker. The `x`s
 * that arrive are counted: the flood's, once each, plus the one of the command's echo.
 */
async function floodThrough(what, url, headers) {
  const ws = await openViewer(url, headers);
  let bytes = 0;
  let xs = 0;
  let tail = '';
  const n = ++floods;
  const marker = `DONE-42-${n}`;
  const command = FLOOD(MIB, n);
  const start = `START-${n}`;
  let started = false;
  const t0 = performance.now();
  const done = new Promise((resolve, reject) => {
    ws.on('message', (d, bin) => {
      if (!bin) return;
      if (!started) {
        // Before the command's echo: the rest of the snapshot. The token cannot end in the
        // tail kept from before (that was searched), so what follows it is a suffix of d.
        const text = tail + d.toString('latin1');
        const at = text.indexOf(start);
        tail = text.slice(-64);
        if (at < 0) return;
        started = true;
        d = Buffer.from(text.slice(at + start.length), 'latin1');
      }
      bytes += d.length;
      xs += countX(d);
      tail = (tail + d.subarray(-64).toString('latin1')).slice(-64);
      if (tail.includes(marker)) resolve();
    });
    ws.once('close', (code) => reject(new Error(`the stream closed (${code}) after ${bytes} bytes`)));
  });
  ws.send(Buffer.from(command), { binary: true });
  await done;
  const s = (performance.now() - t0) / 1000;
  ws.close();
  const echoed = countX(Buffer.from(command.slice(command.indexOf(start) + start.length)));
  checks.exact(`${what}, flood ${n}: bytes x after the command`, xs, MIB * 1048576 + echoed);
  return { mibps: bytes / 1048576 / s, seconds: s, bytes };
}

async function echoRtts(url, headers, n) {
  const ws = await openViewer(url, headers);
  let got = '';
  let wake = null;
  ws.on('message', (d, bin) => {
    if (!bin) return;
    got += d.toString('latin1');
    wake?.();
  });
  const rtts = [];
  const letters = 'abcdefghijklmnopqrstuvwxyz';
  for (let i = 0; i < n; i++) {
    const ch = letters[i % letters.length];
    got = '';
    const t0 = performance.now();
    ws.send(Buffer.from(ch), { binary: true });
    while (!got.includes(ch)) await new Promise((r) => (wake = r));
    rtts.push(performance.now() - t0);
    if (i % 60 === 59) ws.send(Buffer.from('\x15'), { binary: true }); // ^U: keep the line short
    await sleepMs(2);
  }
  ws.close();
  return rtts.sort((a, b) => a - b);
}

function rawPty(mib) {
  return new Promise((resolve) => {
    const t0 = performance.now();
    let bytes = 0;
    const pty = nodePty.spawn('sh', ['-c', `head -c ${mib * 1048576} /dev/zero | tr "\\0" "x"`], {
      cols: 120,
      rows: 40,
      encoding: null,
    });
    let xs = 0;
    pty.onData((d) => {
      bytes += d.length;
      xs += countX(d);
    });
    pty.onExit(() => {
      checks.exact('node-pty direct: bytes x', xs, mib * 1048576);
      resolve({ mibps: bytes / 1048576 / ((performance.now() - t0) / 1000), bytes });
    });
  });
}

try {
  const tower = start(SVC, ['tower', 'serve', '--listen', '127.0.0.1:0', '--log-level', 'warn'], env);
  const url = await until('tower', () => /listening on (\S+)/.exec(tower.out())?.[1]);
  console.error(`tower at ${url}`);
  const cli = { ...env, SVC_BASE_URL: url };
  const token = readFileSync(join(home, 'tower', 'admin.token'), 'utf8').trim();
  spawnSync(process.execPath, [SVC, 'agent', 'node', 'register', '--hostname', 'bench'], { env: cli });
  const nodeId = JSON.parse(readFileSync(env.SVC_NODE_FILE, 'utf8')).node_id;
  writeFileSync(
    join(home, 'svcd', 'agents.toml'),
    ['flood', 'echo', 'noise']
      .map(
        (id) =>
          `[[agent]]\nid = "${id}"\nruntime = "alpha_code"\nsupervise = true\npty = true\ncommand = ["sh"]\n`,
      )
      .join('\n'),
  );
  const svcd = start(SVCD, ['run', '--backend-url', url, '--log-level', 'warn'], env);
  await until('svcd agents', () => {
    if (svcd.p.exitCode !== null) throw new Error(svcd.out());
    const r = spawnSync(process.execPath, [SVC, '--json', 'agent', 'supervise', 'list'], {
      env: cli,
      encoding: 'utf8',
    });
    return r.status === 0 && JSON.parse(r.stdout).items.filter((a) => a.state === 'running').length === 3;
  });
  console.error('svcd up');
  const auth = { authorization: `Bearer ${token}` };
  const viaTower = (agent) =>
    `${url.replace(/^http/, 'ws')}/api/attach-ws?node=${nodeId}&agent=${agent}&cols=120&rows=40`;
  const viaLocal = (agent) =>
    `ws+unix://${join(home, 'svcd', 'svcd.sock')}:/attach?agent=${agent}&cols=120&rows=40`;
  await until('the node on the tower', async () => {
    const ws = new WebSocket(viaTower('flood'), { headers: auth });
    return new Promise((resolve) => {
      ws.once('message', (_d, bin) => {
        ws.close();
        resolve(bin);
      });
      ws.once('close', () => resolve(false));
      ws.once('error', () => resolve(false));
    });
  });

  console.error('node on the tower');
  const loadBefore = load();
  const pids = [tower.p.pid, svcd.p.pid];
  const raw = [];
  const local = [];
  const towered = [];
  const rss = { local: { tower: 0, svcd: 0 }, tower: { tower: 0, svcd: 0 } };
  const keep = (which, peak) => {
    rss[which].tower = Math.max(rss[which].tower, peak[tower.p.pid]);
    rss[which].svcd = Math.max(rss[which].svcd, peak[svcd.p.pid]);
  };
  for (let i = 0; i < RUNS; i++) {
    raw.push(await rawPty(MIB));
    const l = await peakRss(pids, () => floodThrough('local', viaLocal('flood'), {}));
    local.push(l.r);
    keep('local', l.peak);
    const t = await peakRss(pids, () => floodThrough('through the tower', viaTower('flood'), auth));
    towered.push(t.r);
    keep('tower', t.peak);
    console.error(
      `run ${i + 1}: node-pty ${raw.at(-1).mibps.toFixed(1)}, local ${l.r.mibps.toFixed(1)}, tower ${t.r.mibps.toFixed(1)} MiB/s (load ${load()})`,
    );
  }
  const med = (xs) => median(xs.map((x) => x.mibps));
  const quiet = await echoRtts(viaTower('echo'), auth, ECHOES);
  console.error(`quiet echo p50 ${percentile(quiet, 50).toFixed(2)} ms`);

  // Another viewer, also through the tower, watches another agent run `yes` meanwhile.
  const noise = await openViewer(viaTower('noise'), auth);
  let noiseBytes = 0;
  noise.on('message', (d) => {
    noiseBytes += d.length;
  });
  noise.send(Buffer.from(`yes ${'x'.repeat(75)}\r`), { binary: true });
  await until('the flood', () => noiseBytes > 4 * 1048576, 120_000);
  const n0 = noiseBytes;
  const t0 = performance.now();
  const busy = await echoRtts(viaTower('echo'), auth, ECHOES);
  const noiseRate = (noiseBytes - n0) / 1048576 / ((performance.now() - t0) / 1000);
  noise.send(Buffer.from('\x03'), { binary: true });
  noise.close();
  const loadAfter = load();

  const f1 = (x) => x.toFixed(1);
  const f2 = (x) => x.toFixed(2);
  const row = (name, s) =>
    `| ${name} | ${s.length} | ${f2(percentile(s, 50))} | ${f2(percentile(s, 95))} | ${f2(percentile(s, 99))} | ${f2(s[s.length - 1])} |`;
  const ratio = (med(towered) / med(local)) * 100;
  const p99q = percentile(quiet, 99);
  const p99b = percentile(busy, 99);
  const verdict = (ok) => (ok ? 'met' : '**not met**');
  const md = `## attach — PTY output through the tower vs local, keystroke echo

${today()}, ${machine()}. Load average (1/5/15 min) ${loadBefore} before, ${loadAfter} after: the
machine is shared with other engineers' builds and tests, so absolute figures are low and
noisy; compare the ratios measured side by side. \`npm run build && npm run bench -- attach\`
(BENCH_ATTACH_MIB=${MIB}, BENCH_ATTACH_RUNS=${RUNS}, BENCH_ATTACH_ECHOES=${ECHOES}).

Method: \`svc tower serve\` (SQLite) and \`svcd run\` as real processes on loopback; the agents are
\`sh\` in a PTY (\`pty = true\`). **Throughput**: a viewer types
\`: START-n; head -c ${MIB}MiB /dev/zero | tr '\\0' x; echo; echo DONE-$((6*7))-n\` and counts the bytes that
arrive from its echo until DONE-42-n does (fresh markers each run); through the tower
(\`/api/attach-ws\`, Bearer; tower → node dial-back → svcd) vs the same agent over svcd.sock.
Counts start at the command's echo (what comes before it is the rest of the viewer's screen
snapshot) and are checked, or nothing is written: every run delivers the flood's ${MIB} MiB
of \`x\` exactly (the \`x\`s counted equal the flood's plus the one of the command's echo).
Both paths keep the headless xterm screen state in svcd, with flow control end to end.
"node-pty direct" reads the same command's PTY in the benchmark process with nothing else (the
ceiling, not a peer of svcd). Runs alternate; medians of ${RUNS}. Peak RSS sampled every 100 ms
during the floods. **Echo**: one key at a time through the tower, time until the tty's echo of
it comes back (${ECHOES} keys); then again while a second viewer, also through the tower,
watches another agent on the same node run \`yes\`.

| throughput, ${MIB} MiB (median of ${RUNS}) | MiB/s | runs | peak RSS tower / svcd (MiB) |
| ------------------------------- | ----- | ---- | --------------------------- |
| node-pty direct (no svcd)       | ${f1(med(raw))} | ${raw.map((x) => f1(x.mibps)).join(', ')} | |
| local: svcd.sock                | ${f1(med(local))} | ${local.map((x) => f1(x.mibps)).join(', ')} | ${f1(rss.local.tower)} / ${f1(rss.local.svcd)} |
| through the tower               | ${f1(med(towered))} | ${towered.map((x) => f1(x.mibps)).join(', ')} | ${f1(rss.tower.tower)} / ${f1(rss.tower.svcd)} |

Through the tower: ${ratio.toFixed(0)} % of local (target ≥ 50 %: ${verdict(ratio >= 50)}). All
${MIB} MiB arrived in every run, each byte once.

| echo round trip through the tower (ms) | n | p50 | p95 | p99 | max |
| -------------------------------------- | - | --- | --- | --- | --- |
${row('quiet', quiet)}
${row(`while another viewer floods (${f1(noiseRate)} MiB/s)`, busy)}

Target: echo p99 under 10 ms — quiet: ${verdict(p99q < 10)}, while flooding: ${verdict(p99b < 10)}.
`;
  // Written only when the counts hold; the process exits 1 after cleaning up otherwise.
  if (checks.failures.length === 0)
    writeSection('attach', md, [
      {
        peer: 'local svcd.sock (node-pty direct as ceiling)',
        target: 'through the tower ≥ 50 % of local throughput',
        result: `${ratio.toFixed(0)} % (${f1(med(towered))} vs ${f1(med(local))} MiB/s); every byte once`,
        met: met(ratio >= 50),
      },
      {
        peer: '–',
        target: 'keystroke echo p99 < 10 ms through the tower, quiet / while another viewer floods',
        result: `${f2(p99q)} / ${f2(p99b)} ms`,
        met: met(p99q < 10 && p99b < 10),
      },
    ]);
  console.log(md);
} finally {
  cleanup();
  await sleepMs(1000);
  for (const c of children) if (c.exitCode === null) c.kill('SIGKILL');
  rmSync(tmp, { recursive: true, force: true });
}
checks.orExit();
