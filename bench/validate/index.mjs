// bench/validate: per-call overhead of svcd's validation before an MCP tool call (DESIGN §4):
// the schema pack (Ajv), the Wasm booster (embedded in-process default; a --booster-wasm
// module in its worker thread), and the whole pipeline, against the in-process Wasm call
// without isolation (the floor) and the tower's POST /mcp/call round trip that a rejected or
// short-circuited call saves. Imports the built code from dist/. Then the schema builder: the
// protocol schemas built by the lean src/protocol/type.ts or by TypeBox itself, each in fresh
// processes with svcd's V8 flags (schema-builder.mjs).
import { execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import wabtInit from 'wabt';
import { machine, median, percentile, ROOT, today, writeSection } from '../lib/report.mjs';

const dist = (p) => import(join(ROOT, 'dist', p));
const { compileSchemaPack, embeddedSchemaPack } = await dist('protocol/schema-pack.js');
const { embeddedBooster, loadBooster } = await dist('daemon/validate/booster.js');
const { createToolCallValidation } = await dist('daemon/validate/pipeline.js');
const { systemClock } = await dist('lib/clock.js');
const { SVCD_NODE_FLAGS } = await dist('cli/svcd-launch.js');

const CALLS = Number(process.env.BENCH_CALLS ?? 5000);
const WARMUP = 500;
const ROUNDS = 3;
const tmp = mkdtempSync(join(os.tmpdir(), 'svc-bench-validate-'));

const PASS_WAT = `(module
  (memory (export "memory") 1)
  (func (export "alloc") (param $len i32) (result i32)
    (local $need i32)
    (local.set $need (i32.sub (i32.shr_u (i32.add (local.get $len) (i32.const 65535)) (i32.const 16))
                              (memory.size)))
    (if (i32.gt_s (local.get $need) (i32.const 0)) (then (drop (memory.grow (local.get $need)))))
    (i32.const 0))
  (func (export "validate") (param $ptr i32) (param $len i32) (result i32) (i32.const 1)))`;
const wabt = await wabtInit();
const passWasm = wabt.parseWat('pass.wat', PASS_WAT).toBinary({}).buffer;
const passFile = join(tmp, 'pass.wasm');
writeFileSync(passFile, passWasm);

const PAYLOADS = [
  {
    name: 'submit_mesh_task, 160 B',
    tool: 'submit_mesh_task',
    args: {
      mission_id: 'mis_01JBENCH',
      title: 'Build the release',
      description: 'Run the release pipeline',
      priority: 5,
      required_capabilities: ['linux'],
    },
  },
  {
    name: 'create_document, 64 KiB',
    tool: 'create_document',
    args: { domain_id: 'dom_1', mission_id: 'mis_1', title: 'notes', content: 'x'.repeat(64 * 1024) },
  },
];

/** Runs `fn` CALLS times sequentially (after a warm-up); returns µs p50/p99 of ROUNDS medians. */
async function measure(fn) {
  const p50s = [];
  const p99s = [];
  for (let r = 0; r < ROUNDS; r++) {
    for (let i = 0; i < WARMUP; i++) await fn();
    const us = new Float64Array(CALLS);
    for (let i = 0; i < CALLS; i++) {
      const t = performance.now();
      await fn();
      us[i] = (performance.now() - t) * 1000;
    }
    const sorted = Array.from(us).sort((a, b) => a - b);
    p50s.push(percentile(sorted, 50));
    p99s.push(percentile(sorted, 99));
  }
  return { p50: median(p50s), p99: median(p99s) };
}

async function startTower() {
  const dataDir = join(tmp, 'tower');
  const child = spawn(
    process.execPath,
    [
      join(ROOT, 'dist/cli/svc.js'),
      'tower',
      'serve',
      '--listen',
      '127.0.0.1:0',
      '--data-dir',
      dataDir,
      '--log-level',
      'warn',
    ],
    { env: { ...process.env, SVC_HOME: join(tmp, 'home') }, stdio: ['ignore', 'pipe', 'inherit'] },
  );
  const url = await new Promise((resolve, reject) => {
    let out = '';
    child.stdout.on('data', (d) => {
      out += d;
      const m = /listening on (\S+)/.exec(out);
      if (m) resolve(m[1]);
    });
    child.once('exit', (code) => reject(new Error(`tower exited ${code}`)));
  });
  return { child, url, token: readFileSync(join(dataDir, 'admin.token'), 'utf8').trim() };
}

const load = os
  .loadavg()
  .map((l) => l.toFixed(1))
  .join(' ');
const pack = compileSchemaPack(embeddedSchemaPack());
const embedded = embeddedBooster();
const worker = await loadBooster(passFile, { clock: systemClock });
const floor = new WebAssembly.Instance(new WebAssembly.Module(passWasm), {}).exports;
const noEmit = () => {};
const micros = () => performance.now() * 1000;
const withEmbedded = createToolCallValidation({ pack, booster: embedded, emit: noEmit, micros });
const withWorker = createToolCallValidation({ pack, booster: worker, emit: noEmit, micros });
const tower = await startTower();

const rows = [];
try {
  for (const p of PAYLOADS) {
    const bytes = () => Buffer.from(JSON.stringify({ tool: p.tool, args: p.args }));
    const cases = [
      ['schema pack only (Ajv)', async () => pack.check(p.tool, p.args)],
      ['embedded booster (in-process Wasm, JSON encode included)', async () => embedded.check(bytes())],
      [
        '`--booster-wasm` module in its worker thread (JSON encode included)',
        async () => worker.check(bytes()),
      ],
      ['**svcd default: schema pack + embedded booster**', async () => withEmbedded.check(p.tool, p.args)],
      [
        '**svcd with `--booster-wasm`: schema pack + worker booster**',
        async () => withWorker.check(p.tool, p.args),
      ],
      [
        'floor: same module called in-process, no isolation',
        async () => {
          const b = bytes();
          const ptr = floor.alloc(b.length);
          new Uint8Array(floor.memory.buffer).set(b, ptr);
          floor.validate(ptr, b.length);
        },
      ],
    ];
    for (const [name, fn] of cases) {
      const m = await measure(fn);
      rows.push({ payload: p.name, name, ...m });
      console.log(p.name, '|', name, '|', m.p50.toFixed(1), m.p99.toFixed(1));
    }
  }
  // What a refused or short-circuited call saves: the tower's /mcp/call (a 404 after its own
  // schema check and a task lookup, SQLite), over loopback HTTP from this process.
  const body = JSON.stringify({ tool: 'get_mesh_task', args: { task_id: 'mt_nope' } });
  const http = await measure(async () => {
    const r = await fetch(`${tower.url}/mcp/call`, {
      method: 'POST',
      headers: { authorization: `Bearer ${tower.token}`, 'content-type': 'application/json' },
      body,
    });
    await r.arrayBuffer();
  });
  rows.push({
    payload: 'get_mesh_task, 60 B',
    name: 'peer: tower `POST /mcp/call` round trip (loopback HTTP)',
    ...http,
  });
  console.log('tower /mcp/call', http.p50.toFixed(1), http.p99.toFixed(1));
} finally {
  await worker.close();
  tower.child.kill('SIGTERM');
  rmSync(tmp, { recursive: true, force: true });
}

// ---- the schema builder: lean subset vs TypeBox ------------------------------------------------

const BUILDER_RUNS = Number(process.env.BENCH_BUILDER_RUNS ?? 7);
const builderRuns = { lite: [], typebox: [] };
for (let i = 0; i < BUILDER_RUNS; i++) {
  // Alternated, so both see the same load.
  for (const mode of ['lite', 'typebox']) {
    const out = execFileSync(
      process.execPath,
      [...SVCD_NODE_FLAGS, '--expose-gc', join(import.meta.dirname, 'schema-builder.mjs'), mode],
      { encoding: 'utf8' },
    );
    builderRuns[mode].push(JSON.parse(out.trim().split('\n').at(-1)));
  }
}
const builder = Object.fromEntries(
  Object.entries(builderRuns).map(([mode, runs]) => [
    mode,
    Object.fromEntries(
      ['loadMs', 'modules', 'heapMiB', 'uss', 'rss', 'checkP50'].map((k) => [
        k,
        median(runs.map((r) => r[k])),
      ]),
    ),
  ]),
);
console.log('schema builder', JSON.stringify(builder));

const fmt = (n) => (n >= 100 ? n.toFixed(0) : n.toFixed(1));
const table = [
  '| payload | path | p50 µs | p99 µs |',
  '| --- | --- | ---: | ---: |',
  ...rows.map((r) => `| ${r.payload} | ${r.name} | ${fmt(r.p50)} | ${fmt(r.p99)} |`),
].join('\n');

/** The section's rows of the summary table at the top of BENCHMARKS.md. */
function summaryRows() {
  const small = (prefix) =>
    rows.find((r) => r.payload.startsWith('submit_mesh_task') && r.name.includes(prefix));
  const def = small('svcd default');
  const wasm = small('svcd with');
  const http = rows.find((r) => r.name.startsWith('peer: tower'));
  const { lite, typebox } = builder;
  return [
    {
      peer: 'tower POST /mcp/call round trip; the module in-process (floor)',
      target: '–',
      result: `svcd adds ${fmt(def.p50)} µs p50 / ${fmt(def.p99)} µs p99 per 160 B call by default, ${fmt(wasm.p50)} / ${fmt(wasm.p99)} µs with --booster-wasm; the tower round trip it saves ${fmt(http.p50)} µs p50`,
      met: '–',
    },
    {
      peer: '@sinclair/typebox building the protocol schemas',
      target: '–',
      result: `the lean builder: ${lite.modules} modules, ${lite.loadMs.toFixed(0)} ms, USS ${lite.uss.toFixed(1)} MiB; TypeBox: ${typebox.modules} modules, ${typebox.loadMs.toFixed(0)} ms, USS ${typebox.uss.toFixed(1)} MiB; the same check p50 (${lite.checkP50.toFixed(2)} vs ${typebox.checkP50.toFixed(2)} µs)`,
      met: '–',
    },
  ];
}

function reading() {
  const get = (payload, prefix) => rows.find((r) => r.payload.startsWith(payload) && r.name.includes(prefix));
  const small = (prefix) => get('submit_mesh_task', prefix);
  const large = (prefix) => get('create_document', prefix);
  const def = small('svcd default');
  const wasm = small('svcd with');
  const thread = small('worker thread');
  const fl = small('floor');
  const http = rows.find((r) => r.name.startsWith('peer: tower'));
  return [
    `Reading: for a typical call (160 B) svcd adds ${fmt(def.p50)} µs p50 / ${fmt(def.p99)} µs p99 by default and ${fmt(wasm.p50)} / ${fmt(wasm.p99)} µs with a \`--booster-wasm\` module;`,
    `the worker thread that makes a looping module stoppable and a trapping one harmless costs ${fmt(thread.p50 - fl.p50)} µs p50 over calling the module in-process (two thread wake-ups through shared memory).`,
    `A 64 KiB document costs ${fmt(large('svcd default').p50)} / ${fmt(large('svcd with').p50)} µs p50 (default / worker): Ajv walks the string for \`maxLength\` (code points) and the call is JSON-encoded and copied, so cost grows linearly with the payload; the large p99s of the in-process rows are garbage collections on this loaded machine.`,
    `Every figure is far below the tower round trip a refused or short-circuited call saves (${fmt(http.p50)} µs p50 here). The machine is shared and was heavily loaded (load average above, on 2 cores): compare rows of the same run, not absolute values.`,
  ].join('\n');
}

writeSection(
  'validate',
  `## validate — per-call overhead of validation before an MCP tool call

Date ${today()}; machine: ${machine()}; load average at start ${load}.
Command: \`npm run build && npm run bench -- validate\` (${CALLS} sequential calls after ${WARMUP} warm-up, ${ROUNDS} rounds, medians of the per-round p50/p99; one process, the built code from dist/; the tower in its own process, SQLite).
Method: each row times one call of the real code path. "schema pack" is the compiled embedded pack (Ajv) on the tool's args; the booster rows include encoding the call as JSON (\`{"tool","args"}\`), which the pipeline does once; the pipeline rows are \`createToolCallValidation().check()\` as mcp.call runs it, with the telemetry sink a no-op (in svcd the outbox insert is started, not awaited, by the call; its cost is not in these figures). The worker booster is a module whose \`validate\` returns 1, run the way \`--booster-wasm\` runs it: payload copied into memory shared with its worker thread, which waits for it in \`Atomics.wait\`; svcd awaits the verdict with \`Atomics.waitAsync\`, the time limit as its timeout. An earlier version passed messages (\`postMessage\` both ways): about 50-65 µs p50 for the 160 B call on this machine, under the same load.
Peers: the same module called in-process without isolation (the floor: what the worker thread costs is the difference), and the tower's own \`/mcp/call\` round trip, which every refused or short-circuited call avoids.

${table}

${reading()}

### The schema builder: the lean subset (src/protocol/type.ts) or TypeBox

Method: a fresh process per run with svcd's V8 flags (\`${SVCD_NODE_FLAGS.join(' ')}\`) imports every protocol module from dist/ (what svcd and svc load), built with the lean builder or, through a module hook (\`bench/validate/schema-builder.mjs\`), with TypeBox's own \`Type\`; then two GCs, and the memory read from \`/proc/self/smaps_rollup\`. ${BUILDER_RUNS} runs of each, alternated, medians. "check p50" is the schema pack's Ajv check of the 160 B call (20 000 calls after 2 000 warm-up) on the schemas so built.

| builder | modules loaded | load time (ms) | heap after GC (MiB) | USS (MiB) | RSS (MiB) | check p50 (µs) |
| --- | ---: | ---: | ---: | ---: | ---: | ---: |
${['lite', 'typebox']
  .map((m) => {
    const b = builder[m];
    return `| ${m === 'lite' ? 'lean subset (src/protocol/type.ts)' : '@sinclair/typebox'} | ${b.modules} | ${b.loadMs.toFixed(0)} | ${b.heapMiB.toFixed(1)} | ${b.uss.toFixed(1)} | ${b.rss.toFixed(1)} | ${b.checkP50.toFixed(2)} |`;
  })
  .join('\n')}

Reading: TypeBox would add ${builder.typebox.modules - builder.lite.modules} modules, ${(builder.typebox.loadMs - builder.lite.loadMs).toFixed(0)} ms of loading to each svcd and \`svc\` process, ${(builder.typebox.uss - builder.lite.uss).toFixed(1)} MiB of private memory (USS) and ${(builder.typebox.rss - builder.lite.rss).toFixed(1)} MiB of RSS (in these fresh processes), kept by svcd for its whole life, and nothing per call: the schemas are the same objects (src/protocol/type.test.ts checks every exported schema against TypeBox's builder), so Ajv compiles and runs the same code (check p50 ${builder.lite.checkP50.toFixed(2)} vs ${builder.typebox.checkP50.toFixed(2)} µs). The lean subset stays.`,
  summaryRows(),
);
