// bench/secrets: latency and throughput of reading a secret through secrets.sock (cache off,
// cache on), against the node fetch over HTTP that the broker makes, a bare unix socket
// server with a fixed reply (the floor), and `svcd get-secret` as an agent runs it.
// Tower, broker and clients are separate processes.
import { spawn, spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { createConnection } from 'node:net';
import { join } from 'node:path';
import { countChecks } from '../lib/counts.mjs';
import { machine, median, percentile, ROOT, today, writeSection } from '../lib/report.mjs';

const DURATION_MS = Number(process.env.BENCH_DURATION ?? 5) * 1000;
const SEQUENTIAL = 1000;
const CONCURRENCY = 16;
const here = join(ROOT, 'bench/secrets');
/** The value bench/secrets/tower.mjs stores (and the bare socket answers). */
const VALUE = 'x'.repeat(64);
/** Every request answered with the secret's value, or no figures are written. */
const checks = countChecks('secrets');

function startChild(args, env = {}) {
  const child = spawn(process.execPath, args, {
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  return new Promise((resolve, reject) => {
    let out = '';
    child.stdout.on('data', (d) => {
      out += d;
      const nl = out.indexOf('\n');
      if (nl >= 0) resolve({ child, info: JSON.parse(out.slice(0, nl)) });
    });
    child.once('exit', (code) => reject(new Error(`child exited ${code}`)));
  });
}

async function stopChild(c) {
  const done = new Promise((r) => c.child.once('exit', r));
  c.child.kill('SIGTERM');
  await done;
}

function askSocket(path, session) {
  return new Promise((resolve, reject) => {
    const s = createConnection(path);
    let text = '';
    s.setEncoding('utf8');
    s.on('data', (d) => {
      text += d;
    });
    s.on('error', reject);
    s.on('close', () => {
      const r = JSON.parse(text);
      if (!r.ok) reject(new Error(r.error.code));
      else resolve(r.value);
    });
    s.on('connect', () => s.end(`${JSON.stringify({ op: 'get', session, name: 'BENCH_TOKEN' })}\n`));
  });
}

async function fetchHttp(url, jwt) {
  const r = await fetch(`${url}/secrets/BENCH_TOKEN/fetch`, {
    method: 'POST',
    headers: { authorization: `Bearer ${jwt}`, 'content-type': 'application/json' },
    body: JSON.stringify({ agent_id: 'agt_bench' }),
  });
  if (r.status !== 200) throw new Error(`HTTP ${r.status}`);
  return (await r.json()).value;
}

/** Latencies (sequential) and rate (concurrent) of `op`; every answer must be the value. */
async function measure(what, op) {
  let calls = 0;
  let right = 0;
  const call = async () => {
    calls++;
    if ((await op()) === VALUE) right++;
  };
  for (let i = 0; i < 100; i++) await call(); // warm-up
  const lat = [];
  for (let i = 0; i < SEQUENTIAL; i++) {
    const t = performance.now();
    await call();
    lat.push(performance.now() - t);
  }
  lat.sort((a, b) => a - b);
  let n = 0;
  const end = performance.now() + DURATION_MS;
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      while (performance.now() < end) {
        await call();
        n++;
      }
    }),
  );
  const rps = Math.round(n / ((performance.now() - t0) / 1000));
  checks.exact(`${what}: answers with the secret's value`, right, calls);
  return { p50: percentile(lat, 50), p99: percentile(lat, 99), rps };
}

const rssMiB = (pid) => {
  const m = /VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return m ? Math.round(Number(m[1]) / 1024) : Number.NaN;
};

const tower = await startChild([join(here, 'tower.mjs')]);
const { url, jwt } = tower.info;
const rows = [];
try {
  const label = 'node fetch over HTTP (what the broker calls)';
  rows.push([label, await measure(label, () => fetchHttp(url, jwt)), null]);
  for (const [label, args] of [
    ['secrets.sock, cache off (default)', ['broker', url, jwt]],
    ['secrets.sock, cache 30s', ['broker', url, jwt, '30s']],
    ['bare unix socket, fixed reply (floor)', ['bare']],
  ]) {
    const b = await startChild([join(here, 'broker.mjs'), ...args]);
    try {
      const idle = rssMiB(b.info.pid);
      const r = await measure(label, () => askSocket(b.info.socket, b.info.session));
      rows.push([label, r, { idle, loaded: rssMiB(b.info.pid) }]);
      if (label.startsWith('secrets.sock, cache off')) await processRows(b);
    } finally {
      await stopChild(b);
    }
  }
} finally {
  await stopChild(tower);
}

/** `svcd get-secret` as an agent runs it, and the bare process start it cannot go below. */
async function processRows(b) {
  const runs = [];
  for (let i = 0; i < 20; i++) {
    const t = performance.now();
    const p = spawnSync(
      process.execPath,
      [join(ROOT, 'dist/cli/svcd.js'), 'get-secret', 'BENCH_TOKEN', '--raw'],
      {
        env: { ...process.env, SVC_SECRETS_SOCKET: b.info.socket, SVC_SECRETS_SESSION: b.info.session },
      },
    );
    if (p.status !== 0) throw new Error(`svcd get-secret failed: ${p.stderr}`);
    checks.that(String(p.stdout).trim() === VALUE, `svcd get-secret run ${i + 1}: did not answer the value`);
    runs.push(performance.now() - t);
  }
  rows.push([
    '`svcd get-secret` process (spawn to exit, 20 runs)',
    { p50: median(runs), p99: Math.max(...runs), rps: null },
    null,
  ]);
  const node = spawnSync(process.execPath, ['-e', '0']);
  if (node.status !== 0) throw new Error('node failed');
  const bare = [];
  for (let i = 0; i < 20; i++) {
    const t = performance.now();
    spawnSync(process.execPath, ['-e', '0']);
    bare.push(performance.now() - t);
  }
  rows.push([
    '`node -e 0` (process start floor, 20 runs)',
    { p50: median(bare), p99: Math.max(...bare), rps: null },
    null,
  ]);
}

const fmt = (v) =>
  v === null || v === undefined
    ? '-'
    : typeof v === 'number'
      ? v < 10
        ? v.toFixed(2)
        : String(Math.round(v))
      : v;
const table = [
  '| path | p50 ms | p99 ms | req/s (16 concurrent) | broker RSS idle / after, MiB |',
  '|---|---|---|---|---|',
  ...rows.map(
    ([label, r, rss]) =>
      `| ${label} | ${fmt(r.p50)} | ${fmt(r.p99)} | ${fmt(r.rps)} | ${rss ? `${rss.idle} / ${rss.loaded}` : '-'} |`,
  ),
].join('\n');
const md = `## secrets — reading a secret through secrets.sock

Date ${today()}; machine: ${machine()}.
Command: \`npm run build && npm run bench -- secrets\` (${SEQUENTIAL} sequential requests for the latencies after 100 warm-up, then ${CONCURRENCY} concurrent clients for ${DURATION_MS / 1000} s for the rate; tower (SQLite), broker and client in three processes).
Each secrets.sock request is one connection: session lookup, then (cache off) the node fetch to the tower (JWT check, agent and grant lookup, AES-256-GCM decrypt, audit event written in a transaction). No peer secrets broker (Vault agent, etc.) is installed here; the rows "node fetch over HTTP" and "bare unix socket" bound the broker from below: what it calls, and a socket server doing nothing.
Counts are checked, or nothing is written: every request of every row (warm-up included) answered with the secret's value.

${table}
`;
checks.orExit();
const at = (label) => rows.find(([l]) => l.startsWith(label))?.[1];
writeSection('secrets', md, [
  {
    peer: 'none installed; floors: node fetch over HTTP, bare unix socket',
    target: '–',
    result: `p50 ${fmt(at('secrets.sock, cache off').p50)} ms cache off (its fetch ${fmt(at('node fetch').p50)}), ${fmt(at('secrets.sock, cache 30s').p50)} ms cached (bare socket ${fmt(at('bare unix').p50)}); every answer the value`,
    met: '–',
  },
]);
console.log(md);
