// The doctor's report: one entry per check (name, ok/warn/fail, detail, repair hint), the
// fixes --fix made, and how both are printed. No I/O beyond formatting.

export type CheckStatus = 'ok' | 'warn' | 'fail';

export interface Check {
  /** Stable name scripts can match on, e.g. `node_identity`, `tool:tmux`. */
  name: string;
  status: CheckStatus;
  /** What was found, in one line. */
  detail: string;
  /** What to do about it; null when the check is ok. */
  hint: string | null;
}

export interface Fix {
  name: string;
  /** What --fix did, or "already present" when there was nothing to do. */
  action: string;
  changed: boolean;
}

export interface DoctorReport {
  ok: boolean;
  summary: Record<CheckStatus, number>;
  checks: Check[];
  fixes: Fix[];
}

export function makeReport(checks: Check[], fixes: Fix[]): DoctorReport {
  const summary: Record<CheckStatus, number> = { ok: 0, warn: 0, fail: 0 };
  for (const c of checks) summary[c.status] += 1;
  return { ok: summary.fail === 0, summary, checks, fixes };
}

/** The human rendering: fixes made, a STATUS/CHECK/DETAIL table, then the hints, then a total. */
export function renderReport(r: DoctorReport): string {
  const lines: string[] = [];
  for (const f of r.fixes) lines.push(`fix ${f.name}: ${f.action}`);
  if (r.fixes.length) lines.push('');
  const w = Math.max(5, ...r.checks.map((c) => c.name.length));
  lines.push(`${'STATUS'.padEnd(6)}  ${'CHECK'.padEnd(w)}  DETAIL`);
  for (const c of r.checks) lines.push(`${c.status.padEnd(6)}  ${c.name.padEnd(w)}  ${c.detail}`);
  const hinted = r.checks.filter((c) => c.hint);
  if (hinted.length) {
    lines.push('', 'to repair:');
    for (const c of hinted) lines.push(`  ${c.name}: ${c.hint}`);
  }
  const { ok, warn, fail } = r.summary;
  lines.push('', `${ok} ok, ${warn} warning${warn === 1 ? '' : 's'}, ${fail} failed`);
  return lines.join('\n');
}
