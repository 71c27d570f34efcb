// Shared bench helpers: machine description, percentiles, and writing one section of
// BENCHMARKS.md between markers so each benchmark updates only its own part, together with
// its rows of the summary table at the top of the file, which is rebuilt from every
// section's rows after each write (never edited by hand).
// BENCH_REPORT=FILE writes to FILE instead of BENCHMARKS.md (small trial runs).
import { execSync } from 'node:child_process';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

export const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
export const REPORT = process.env.BENCH_REPORT
  ? resolve(process.env.BENCH_REPORT)
  : join(ROOT, 'BENCHMARKS.md');

export const HEADER = `# Benchmarks

Measured with \`npm run build && npm run bench [-- <name>]\` (bench/<name>/index.mjs). Each
benchmark rewrites its own section below (method, machine, figures) and its rows of this
summary table, and checks its own counts first (every event delivered exactly once, every task
completed once, every request answered): when they do not hold it exits non-zero and writes
nothing. Peers are measured in the same run, on the same machine; compare within a section.
What was tried, priced and dropped on the way to these figures is in
[docs/perf-notes.md](docs/perf-notes.md).
`;

export function machine() {
  let pg = 'n/a';
  try {
    pg = execSync('psql --version', { encoding: 'utf8' }).trim();
  } catch {}
  return `${os.cpus().length} cores (${os.cpus()[0]?.model ?? 'cpu'}), ${Math.round(os.totalmem() / 2 ** 30)} GiB, Node ${process.version}, ${pg}`;
}

/** The machine in a few words, for the summary table. */
export function machineShort() {
  const model = os.cpus()[0]?.model ?? 'cpu';
  const cpu = /EPYC/.test(model) ? 'AMD EPYC' : /Xeon/.test(model) ? 'Intel Xeon' : model.split(' ')[0];
  return `${os.cpus().length} cores ${cpu}, ${Math.round(os.totalmem() / 2 ** 30)} GiB, Node ${process.versions.node}`;
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

export function today() {
  return new Date().toISOString().slice(0, 10);
}

/** A summary row's verdict: 'yes' / 'no' against a target, '–' where there is none. */
export const met = (ok) => (ok === null || ok === undefined ? '–' : ok ? 'yes' : '**no**');

const SUMMARY_START = '<!-- bench:summary:start -->';
const SUMMARY_END = '<!-- bench:summary:end -->';
const ROWS = /<!-- bench:rows (.*?) -->/s;

/**
 * Replaces (or appends) the section `name` of the report with `markdown`, then rebuilds the
 * summary table. `rows` are the section's summary rows: `{ peer, target, result, met }`
 * (strings; `met` from met()), stamped with today's date and the machine.
 */
export function writeSection(name, markdown, rows = null) {
  const start = `<!-- bench:${name}:start -->`;
  const end = `<!-- bench:${name}:end -->`;
  let text = existsSync(REPORT) ? readFileSync(REPORT, 'utf8') : HEADER;
  // The rows ride in the section as a comment, so the two are always written together.
  const json = JSON.stringify({ date: today(), machine: machineShort(), rows }).replaceAll(
    '-->',
    '--\\u003e',
  );
  const stamp = rows ? `\n<!-- bench:rows ${json} -->` : '';
  // An anchor the summary table links to (headings carry dates and titles that change).
  const block = `${start}${stamp}\n<a id="${name}"></a>\n\n${markdown.trim()}\n${end}`;
  const i = text.indexOf(start);
  const j = text.indexOf(end);
  text =
    i >= 0 && j > i
      ? text.slice(0, i) + block + text.slice(j + end.length)
      : `${text.trimEnd()}\n\n${block}\n`;
  writeFileSync(REPORT, withSummary(text));
  format();
}

/** Rebuilds the summary table of the report from its sections (npm run bench -- --summary). */
export function writeSummary() {
  if (!existsSync(REPORT)) return;
  writeFileSync(REPORT, withSummary(readFileSync(REPORT, 'utf8')));
  format();
}

/** Every section of `text` in order: its name and the summary rows it carries (or null). */
export function sections(text) {
  const out = [];
  const re = /<!-- bench:([a-z0-9-]+):start -->([\s\S]*?)<!-- bench:\1:end -->/g;
  for (let m = re.exec(text); m; m = re.exec(text)) {
    if (m[1] === 'summary') continue; // the table itself
    const rows = ROWS.exec(m[2]);
    out.push({ name: m[1], summary: rows ? JSON.parse(rows[1]) : null });
  }
  return out;
}

/** `text` with its summary table (after the header) rebuilt from its sections. */
export function withSummary(text) {
  const cell = (s) => String(s).replaceAll('|', '\\|').replaceAll('\n', ' ');
  const lines = [
    '| benchmark | peer | target | result | met | date | machine |',
    '| --- | --- | --- | --- | --- | --- | --- |',
  ];
  for (const { name, summary } of sections(text)) {
    const link = `[${name}](#${name})`;
    if (!summary) {
      lines.push(`| ${link} | – | – | its bench writes no summary rows: see the section | – | – | – |`);
      continue;
    }
    for (const r of summary.rows) {
      lines.push(
        `| ${link} | ${cell(r.peer)} | ${cell(r.target)} | ${cell(r.result)} | ${cell(r.met)} | ${summary.date} | ${cell(summary.machine)} |`,
      );
    }
  }
  const table = `${SUMMARY_START}\n${lines.join('\n')}\n${SUMMARY_END}`;
  const i = text.indexOf(SUMMARY_START);
  const j = text.indexOf(SUMMARY_END);
  if (i >= 0 && j > i) return text.slice(0, i) + table + text.slice(j + SUMMARY_END.length);
  // First summary: right after the header (the title and its paragraph).
  const first = text.indexOf('<!-- bench:');
  return first < 0
    ? `${text.trimEnd()}\n\n${table}\n`
    : `${text.slice(0, first)}${table}\n\n${text.slice(first)}`;
}

/** Tables as `npm run check` (biome) wants them, so a bench run leaves the tree green. */
function format() {
  if (!REPORT.startsWith(`${ROOT}/`)) return;
  try {
    execSync(`npx biome format --write ${JSON.stringify(REPORT)}`, { cwd: ROOT, stdio: 'ignore' });
  } catch {
    console.error(`could not format ${REPORT}: run \`npm run format\``);
  }
}
