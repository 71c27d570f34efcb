// An agent process's CPU and memory, read from /proc when its status is asked for (cheap: two
// small files). CPU is a percentage of one core over the time since the previous reading of
// the same process (at least MIN_WINDOW_MS apart; until then the last percentage stands), so
// the first reading has only the CPU seconds used so far. Not Linux: no /proc, no usage.
import { readFileSync } from 'node:fs';
import type { AgentUsage } from '../../protocol/agents.js';

/** Clock ticks per second of /proc/<pid>/stat (USER_HZ, 100 on every Linux ABI). */
const USER_HZ = 100;
const MIN_WINDOW_MS = 1000;

export interface UsageState {
  pid: number;
  ticks: number;
  at: number;
  percent: number | null;
}

/** utime + stime of `pid` in ticks, and its resident memory in bytes; null when it is gone. */
export function readProc(pid: number, procDir = '/proc'): { ticks: number; rssBytes: number } | null {
  try {
    const stat = readFileSync(`${procDir}/${pid}/stat`, 'utf8');
    // The command name (field 2) may hold spaces and parentheses: fields are counted after
    // its last ')'. utime and stime are fields 14 and 15.
    const rest = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    const ticks = Number(rest[11]) + Number(rest[12]);
    const status = readFileSync(`${procDir}/${pid}/status`, 'utf8');
    const kb = /^VmRSS:\s+(\d+) kB/m.exec(status)?.[1];
    if (!Number.isFinite(ticks)) return null;
    return { ticks, rssBytes: kb === undefined ? 0 : Number(kb) * 1024 };
  } catch {
    return null;
  }
}

/** The usage of `pid` now, and the state to keep for the next reading. */
export function sampleUsage(
  pid: number | null,
  nowMs: number,
  prev: UsageState | null,
  procDir?: string,
): { usage: AgentUsage | null; state: UsageState | null } {
  if (pid === null) return { usage: null, state: null };
  const r = readProc(pid, procDir);
  if (!r) return { usage: null, state: null };
  let state: UsageState;
  if (prev && prev.pid === pid && nowMs - prev.at < MIN_WINDOW_MS) state = prev;
  else if (prev && prev.pid === pid && nowMs > prev.at) {
    const percent = ((r.ticks - prev.ticks) / USER_HZ / ((nowMs - prev.at) / 1000)) * 100;
    state = { pid, ticks: r.ticks, at: nowMs, percent: Math.max(0, Math.round(percent * 10) / 10) };
  } else state = { pid, ticks: r.ticks, at: nowMs, percent: null };
  return {
    usage: { cpu_percent: state.percent, cpu_seconds: r.ticks / USER_HZ, rss_bytes: r.rssBytes },
    state,
  };
}
