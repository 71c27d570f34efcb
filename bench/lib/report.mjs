// Shared bench helpers: machine description, percentiles, and writing one section of
// BENCHMARKS.md between markers so each benchmark updates only its own part.
import { execSync } from 'node:child_process';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

export const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
const FILE = join(ROOT, 'BENCHMARKS.md');

export function machine() {
  let pg = 'n/a';
  try {
    pg = execSync('psql --version', { encoding: 'utf8' }).trim();
  } catch {}
  return `${os.cpus().length} cores (${os.cpus()[0]?.model ?? 'cpu'}), ${Math.round(os.totalmem() / 2 ** 30)} GiB, Node ${process.version}, ${pg}`;
}

export function percentile(sorted, p) {
  if (sorted.length === 0) return Number.NaN;
  const i = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
  return sorted[i];
}

export function median(values) {
  const s = [...values].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
}

/** Replaces (or appends) the section `name` of BENCHMARKS.md with `markdown`. */
export function writeSection(name, markdown) {
  const start = `<!-- bench:${name}:start -->`;
  const end = `<!-- bench:${name}:end -->`;
  let text = existsSync(FILE)
    ? readFileSync(FILE, 'utf8')
    : '# Benchmarks\n\nMeasured with `npm run bench [-- <name>]`; each section is rewritten by its benchmark.\n';
  const block = `${start}\n${markdown.trim()}\n${end}`;
  const i = text.indexOf(start);
  const j = text.indexOf(end);
  text =
    i >= 0 && j > i
      ? text.slice(0, i) + block + text.slice(j + end.length)
      : `${text.trimEnd()}\n\n${block}\n`;
  writeFileSync(FILE, text);
  // Tables as `npm run check` (biome) wants them, so a bench run leaves the tree green.
  try {
    execSync(`npx biome format --write ${JSON.stringify(FILE)}`, { cwd: ROOT, stdio: 'ignore' });
  } catch {
    console.error('could not format BENCHMARKS.md: run `npm run format`');
  }
}

export function today() {
  return new Date().toISOString().slice(0, 10);
}
