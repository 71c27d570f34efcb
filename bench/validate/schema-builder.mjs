// bench/validate, child process: what building the protocol schemas costs with the lean builder
// (src/protocol/type.ts) or with TypeBox itself (`node schema-builder.mjs lite|typebox`). Loads
// every protocol module from dist/ (with `typebox`, a module hook hands them TypeBox's `Type` in
// place of ./type.js), then prints one JSON line: load time, modules loaded, heap after GC,
// USS and RSS, and the p50 of the schema pack's check (Ajv) on the built tool schemas. Run with
// svcd's V8 flags and --expose-gc (index.mjs does).
import { readdirSync, readFileSync } from 'node:fs';
import { registerHooks } from 'node:module';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const mode = process.argv[2];
if (mode !== 'lite' && mode !== 'typebox') throw new Error('usage: schema-builder.mjs lite|typebox');
const here = fileURLToPath(new URL('.', import.meta.url));
const protocolDir = join(here, '..', '..', 'dist', 'protocol');
const shim = pathToFileURL(join(here, 'typebox-type.mjs')).href;

let modules = 0;
registerHooks({
  resolve(specifier, context, next) {
    if (mode === 'typebox' && specifier === './type.js' && context.parentURL?.includes('/dist/protocol/'))
      return next(shim, context);
    return next(specifier, context);
  },
  load(url, context, next) {
    modules++;
    return next(url, context);
  },
});

function ussAndRssMiB() {
  const text = readFileSync('/proc/self/smaps_rollup', 'utf8');
  const kb = (field) => Number(new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(text)?.[1] ?? 0);
  return { uss: (kb('Private_Clean') + kb('Private_Dirty')) / 1024, rss: kb('Rss') / 1024 };
}

const files = readdirSync(protocolDir).filter((f) => f.endsWith('.js') && f !== 'type.js');
const t0 = performance.now();
for (const f of files) await import(pathToFileURL(join(protocolDir, f)).href);
const loadMs = performance.now() - t0;
const loaded = modules;
globalThis.gc();
globalThis.gc();
const heapMiB = process.memoryUsage().heapUsed / 2 ** 20;
const { uss, rss } = ussAndRssMiB();

// The per-call check on what was built (Ajv compiles the same JSON Schema either way).
const { compileSchemaPack, embeddedSchemaPack } = await import(
  pathToFileURL(join(protocolDir, 'schema-pack.js')).href
);
const pack = compileSchemaPack(embeddedSchemaPack());
const args = {
  mission_id: 'mis_01JBENCH',
  title: 'Build the release',
  description: 'Run the release pipeline',
  priority: 5,
  required_capabilities: ['linux'],
};
for (let i = 0; i < 2000; i++) pack.check('submit_mesh_task', args);
const us = new Float64Array(20_000);
for (let i = 0; i < us.length; i++) {
  const t = performance.now();
  pack.check('submit_mesh_task', args);
  us[i] = (performance.now() - t) * 1000;
}
us.sort();
console.log(
  JSON.stringify({
    mode,
    loadMs,
    modules: loaded,
    heapMiB,
    uss,
    rss,
    checkP50: us[Math.floor(us.length / 2)],
  }),
);
