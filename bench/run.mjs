#!/usr/bin/env node
// npm run bench [-- <name>…]: runs bench/<name>/index.mjs (all of them without a name), then
// rebuilds BENCHMARKS.md's summary table from its sections; `npm run bench -- --summary` only
// rebuilds the table. Benchmarks import the built code from dist/, so build first
// (npm run build). A benchmark whose counts do not hold exits non-zero and writes nothing.
import { spawnSync } from 'node:child_process';
import { existsSync, readdirSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { writeSummary } from './lib/report.mjs';

const here = dirname(fileURLToPath(import.meta.url));
const all = readdirSync(here, { withFileTypes: true })
  .filter((d) => d.isDirectory() && existsSync(join(here, d.name, 'index.mjs')))
  .map((d) => d.name)
  .sort();
if (process.argv.includes('--summary')) {
  writeSummary();
  process.exit(0);
}
const names = process.argv.slice(2).filter((a) => !a.startsWith('-'));
const chosen = names.length ? names : all;
for (const name of chosen) {
  if (!all.includes(name)) {
    console.error(`unknown benchmark "${name}"; have: ${all.join(', ') || 'none'}`);
    process.exit(2);
  }
}
let failed = 0;
for (const name of chosen) {
  console.log(`\n=== bench ${name} ===`);
  const r = spawnSync(
    process.execPath,
    [join(here, name, 'index.mjs'), ...process.argv.slice(2).filter((a) => a.startsWith('-'))],
    {
      stdio: 'inherit',
    },
  );
  if (r.status !== 0) {
    failed++;
    console.error(`bench ${name} failed (exit ${r.status ?? r.signal})`);
  }
}
writeSummary();
process.exit(failed ? 1 : 0);
