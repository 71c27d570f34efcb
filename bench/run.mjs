#!/usr/bin/env node
// npm run bench [-- <name>…]: runs bench/<name>/index.mjs (all of them without a name).
// Benchmarks import the built code from dist/, so build first (npm run build).
import { spawnSync } from 'node:child_process';
import { existsSync, readdirSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const all = readdirSync(here, { withFileTypes: true })
  .filter((d) => d.isDirectory() && existsSync(join(here, d.name, 'index.mjs')))
  .map((d) => d.name)
  .sort();
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
  if (r.status !== 0) failed++;
}
process.exit(failed ? 1 : 0);
