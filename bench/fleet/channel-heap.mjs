// What a node control channel costs a tower replica in memory, and what it is made of (issue
// 33: target < 20 KiB per channel). One replica (`svc tower serve` from dist/, PostgreSQL),
// N simulated nodes (sim.mjs) connected straight to it; a V8 heap snapshot (SIGUSR2) with
// no channel and one with all N, and the difference per channel by object kind (the
// snapshot's constructor or type: what the channels hold, garbage excluded), beside the RSS
// difference per channel (which also counts the heap's garbage and headroom) and the
// replica's CPU with the N channels idle. A tool, not a benchmark (no figures are written):
// `node bench/fleet/channel-heap.mjs` after `npm run build`; BENCH_FLEET_HEAP_N (1000),
// BENCH_FLEET_HEAP_TOP (25 kinds listed), BENCH_FLEET_HEAP_NODE_ARGS (flags for the tower's
// node, e.g. `--trace-gc` with BENCH_FLEET_HEAP_ECHO=1, or `--cpu-prof --cpu-prof-dir=DIR`).
import { randomBytes } from 'node:crypto';
import {
  closeSync,
  mkdtempSync,
  openSync,
  readdirSync,
  readFileSync,
  readSync,
  rmSync,
  statSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { sql, startReplica } from '../lib/replica.mjs';
import { createFleet } from './sim.mjs';

const N = Number(process.env.BENCH_FLEET_HEAP_N ?? 1000);
const TOP = Number(process.env.BENCH_FLEET_HEAP_TOP ?? 25);
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const dir = mkdtempSync(join(tmpdir(), 'svc-channel-heap-'));
const schema = `channel_heap_${process.pid}_${randomBytes(3).toString('hex')}`;

function rssKiB(pid) {
  const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return Number(m?.[1] ?? Number.NaN);
}

/** CPU time (user + system) a process has used, in ms. */
function cpuMs(pid) {
  const f = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
  return ((Number(f[11]) + Number(f[12])) * 1000) / 100;
}

/** Writes a heap snapshot of `child` (SIGUSR2) into `dir` and returns its path once complete. */
async function snapshot(child) {
  const before = new Set(readdirSync(dir).filter((f) => f.endsWith('.heapsnapshot')));
  child.kill('SIGUSR2');
  for (;;) {
    await sleep(500);
    const f = readdirSync(dir).find((x) => x.endsWith('.heapsnapshot') && !before.has(x));
    if (!f) continue;
    const p = join(dir, f);
    const size = statSync(p).size;
    await sleep(1000);
    // Complete: no longer growing, and the JSON closed.
    if (size === 0 || statSync(p).size !== size) continue;
    const fd = openSync(p, 'r');
    const tail = Buffer.alloc(16);
    readSync(fd, tail, 0, 16, Math.max(0, size - 16));
    closeSync(fd);
    if (tail.toString('latin1').trimEnd().endsWith('}')) return p;
  }
}

/** Self size and count per object kind (type:name) of a heap snapshot. */
function kinds(path) {
  const snap = JSON.parse(readFileSync(path, 'utf8'));
  const f = snap.snapshot.meta.node_fields;
  const types = snap.snapshot.meta.node_types[0];
  const width = f.length;
  const iType = f.indexOf('type');
  const iName = f.indexOf('name');
  const iSize = f.indexOf('self_size');
  const out = new Map();
  let total = 0;
  for (let i = 0; i < snap.nodes.length; i += width) {
    const type = types[snap.nodes[i + iType]];
    // Names of strings and code are their contents: group those by type only.
    const name = ['object', 'closure', 'native', 'hidden', 'array'].includes(type)
      ? snap.strings[snap.nodes[i + iName]]
      : '';
    const key = `${type}:${name}`;
    const size = snap.nodes[i + iSize];
    total += size;
    const k = out.get(key) ?? { count: 0, size: 0 };
    k.count++;
    k.size += size;
    out.set(key, k);
  }
  return { kinds: out, total };
}

async function main() {
  await sql(`create schema "${schema}"`);
  const procs = [];
  const started = startReplica({
    home: join(dir, 'home'),
    schema,
    masterKey: randomBytes(32).toString('hex'),
    procs,
    cwd: dir,
    nodeArgs: [
      '--heapsnapshot-signal=SIGUSR2',
      ...(process.env.BENCH_FLEET_HEAP_NODE_ARGS ?? '').split(' ').filter(Boolean),
    ],
    // BENCH_FLEET_HEAP_ECHO=1: the tower's stdout here too (with --trace-gc in the node args).
    echo: Boolean(process.env.BENCH_FLEET_HEAP_ECHO),
  });
  const { child } = procs[0];
  try {
    const { url } = await started;
    const admin = readFileSync(join(dir, 'home', 'tower', 'admin.token'), 'utf8').trim();
    const nodes = [];
    for (let i = 0; i < N; i += 16) {
      const batch = await Promise.all(
        Array.from({ length: Math.min(16, N - i) }, async (_, k) => {
          const res = await fetch(`${url}/nodes`, {
            method: 'POST',
            headers: { authorization: `Bearer ${admin}`, 'content-type': 'application/json' },
            body: JSON.stringify({ hostname: `heap-${i + k}` }),
          });
          const body = await res.json();
          if (res.status !== 201) throw new Error(`register: ${res.status} ${JSON.stringify(body)}`);
          return { id: body.id, jwt: body.jwt };
        }),
      );
      nodes.push(...batch);
    }
    // A few channels open and close first, so code paths are compiled before the baseline.
    const warm = createFleet({ url, nodes: nodes.slice(0, 20), missionId: () => null });
    warm.connectAll();
    await warm.until('warm-up channels', () => warm.connected() === 20, 60_000);
    await warm.close();
    await sleep(3000);
    // The baseline snapshot first: writing one costs native memory that the process keeps
    // (malloc), so RSS is taken after it, with that memory already counted on both sides.
    const a = kinds(await snapshot(child));
    await sleep(3000);
    const idle0 = cpuMs(child.pid);
    await sleep(5000);
    console.log(
      `idle CPU with no channel: ${((100 * (cpuMs(child.pid) - idle0)) / 5000).toFixed(0)} % of a core`,
    );
    const rssBefore = rssKiB(child.pid);
    const smaps = (pid) =>
      readFileSync(`/proc/${pid}/smaps_rollup`, 'utf8')
        .split('\n')
        .filter((l) => /^(Rss|Anonymous|Private_Dirty):/.test(l))
        .join('; ');
    console.log(`before: ${smaps(child.pid)}`);
    const fleet = createFleet({ url, nodes, missionId: () => null });
    fleet.connectAll();
    await fleet.until(`${N} channels`, () => fleet.connected() === N, 600_000);
    await sleep(3000);
    // What N idle channels cost the replica in CPU (heartbeats, credential re-checks).
    const cpu0 = cpuMs(child.pid);
    await sleep(5000);
    console.log(
      `idle CPU with ${N} channels: ${((100 * (cpuMs(child.pid) - cpu0)) / 5000).toFixed(0)} % of a core`,
    );
    const rssAfter = rssKiB(child.pid);
    console.log(`after: ${smaps(child.pid)}`);
    const b = kinds(await snapshot(child));
    // The snapshot collected the garbage: what stays is what the channels hold (and the
    // heap's headroom).
    await sleep(3000);
    const rssAfterGc = rssKiB(child.pid);
    console.log(`after a full GC: ${smaps(child.pid)}`);
    const rows = [];
    for (const [key, v] of b.kinds) {
      const w = a.kinds.get(key) ?? { count: 0, size: 0 };
      rows.push({ key, count: (v.count - w.count) / N, bytes: (v.size - w.size) / N });
    }
    rows.sort((x, y) => y.bytes - x.bytes);
    console.log(`channels: ${N}`);
    console.log(
      `RSS per channel: ${((rssAfter - rssBefore) / N).toFixed(1)} KiB (after a full GC: ${((rssAfterGc - rssBefore) / N).toFixed(1)} KiB)`,
    );
    console.log(
      `JS heap (snapshot self sizes) per channel: ${((b.total - a.total) / N / 1024).toFixed(2)} KiB`,
    );
    console.log('per channel, by kind (objects, bytes):');
    for (const r of rows.slice(0, TOP)) {
      console.log(`  ${r.bytes.toFixed(0).padStart(7)} B  ${r.count.toFixed(2).padStart(7)}  ${r.key}`);
    }
    await fleet.close();
  } finally {
    // SIGTERM first: a tower run with --cpu-prof writes its profile on a clean exit only.
    const exited = new Promise((r) => child.once('exit', r));
    child.kill('SIGTERM');
    await Promise.race([exited, sleep(10_000)]);
    child.kill('SIGKILL');
    await sql(`drop schema if exists "${schema}" cascade`).catch(() => {});
    rmSync(dir, { recursive: true, force: true });
  }
}

main().then(
  () => process.exit(0),
  (e) => {
    console.error(e);
    process.exit(1);
  },
);
