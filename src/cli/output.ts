// Human output: aligned tables and key/value blocks; --json prints the raw API objects.
import type { CliIO } from './io.js';

export interface Column<T> {
  header: string;
  get(row: T): string | number | null | undefined;
}

export function table<T>(rows: T[], columns: Column<T>[]): string {
  const cells = rows.map((r) => columns.map((c) => fmt(c.get(r))));
  const widths = columns.map((c, i) => Math.max(c.header.length, ...cells.map((row) => row[i]?.length ?? 0)));
  const line = (vals: string[]) =>
    vals
      .map((v, i) => (i === vals.length - 1 ? v : v.padEnd(widths[i] ?? 0)))
      .join('  ')
      .trimEnd();
  return [line(columns.map((c) => c.header.toUpperCase())), ...cells.map(line)].join('\n');
}

export function keyValues(obj: Record<string, unknown>): string {
  const keys = Object.keys(obj);
  const w = Math.max(...keys.map((k) => k.length));
  return keys.map((k) => `${`${k}:`.padEnd(w + 2)}${fmt(obj[k])}`).join('\n');
}

function fmt(v: unknown): string {
  if (v === null || v === undefined) return '-';
  if (typeof v === 'object') return JSON.stringify(v);
  return String(v);
}

/** Prints `data` as JSON when json is set, else the human rendering. */
export function print(io: CliIO, json: boolean, data: unknown, human: () => string): void {
  io.out(json ? JSON.stringify(data, null, 2) : human());
}
