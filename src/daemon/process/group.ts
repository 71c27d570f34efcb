// Process groups: every agent runs as the leader of its own group (setsid), so stop and
// restart reach the whole tree it forked. Liveness is read from /proc and ignores zombies:
// a killed orphan whose reaper never waits for it is dead for every purpose that matters.
import { type ChildProcess, spawn } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import type { Clock } from '../../lib/clock.js';

/** How a process ended: its exit code, or the signal that killed it. */
export interface ExitInfo {
  code: number | null;
  signal: string | null;
}

/** How often a stopping group is checked for exit. */
const EXIT_POLL_MS = 25;
/** After SIGKILL, how long to wait for the kernel to tear the group down. */
const KILL_WAIT_MS = 5_000;

export interface SpawnGroupOptions {
  cwd: string;
  env: NodeJS.ProcessEnv;
  /** stdin: 'ignore' (no TTY, nothing to read) or 'pipe'; stdout and stderr are always piped. */
  stdin: 'ignore' | 'pipe';
}

/** Spawns argv as the leader of a new session and process group (pgid = pid), without a shell. */
export function spawnGroup(argv: readonly string[], opts: SpawnGroupOptions): ChildProcess {
  const [cmd, ...args] = argv;
  if (!cmd) throw new Error('empty command');
  return spawn(cmd, args, {
    cwd: opts.cwd,
    env: opts.env,
    detached: true,
    stdio: [opts.stdin, 'pipe', 'pipe'],
  });
}

interface ProcStat {
  pid: number;
  state: string;
  ppid: number;
  pgrp: number;
}

function readStat(pid: string): ProcStat | null {
  try {
    const text = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // comm may contain spaces and parentheses: the fields after it start at the last ')'.
    const rest = text.slice(text.lastIndexOf(')') + 2).split(' ');
    return { pid: Number(pid), state: rest[0] ?? '?', ppid: Number(rest[1]), pgrp: Number(rest[2]) };
  } catch {
    return null;
  }
}

let procReadable: boolean | null = null;
function hasProc(): boolean {
  if (procReadable === null) {
    try {
      readFileSync('/proc/self/stat');
      procReadable = true;
    } catch {
      procReadable = false;
    }
  }
  return procReadable;
}

/** Live (non-zombie) members of a process group. */
export function groupMembers(pgid: number): number[] {
  if (!hasProc()) {
    try {
      process.kill(-pgid, 0);
      return [pgid];
    } catch {
      return [];
    }
  }
  const out: number[] = [];
  for (const name of readdirSync('/proc')) {
    if (name.charCodeAt(0) < 48 || name.charCodeAt(0) > 57) continue;
    const st = readStat(name);
    if (st && st.pgrp === pgid && st.state !== 'Z' && st.state !== 'X') out.push(st.pid);
  }
  return out;
}

export function groupAlive(pgid: number): boolean {
  return groupMembers(pgid).length > 0;
}

/** Sends a signal to every process of the group; false when the group no longer exists. */
export function signalGroup(pgid: number, signal: NodeJS.Signals): boolean {
  try {
    process.kill(-pgid, signal);
    return true;
  } catch {
    return false;
  }
}

/**
 * Stops a whole group: SIGTERM, then SIGKILL to whatever is left after `graceMs`.
 * Resolves when no live member remains. `waits` is a real-time clock: processes exit in
 * real time even when the watchdog under test runs on a fake one.
 */
export async function stopGroup(pgid: number, graceMs: number, waits: Clock): Promise<'exited' | 'killed'> {
  if (!groupAlive(pgid)) return 'exited';
  signalGroup(pgid, 'SIGTERM');
  // A stopped (SIGSTOP) member never sees SIGTERM until it is continued.
  signalGroup(pgid, 'SIGCONT');
  const deadline = waits.now() + graceMs;
  while (waits.now() < deadline) {
    await waits.sleep(Math.min(EXIT_POLL_MS, Math.max(1, deadline - waits.now())));
    if (!groupAlive(pgid)) return 'exited';
  }
  signalGroup(pgid, 'SIGKILL');
  const killDeadline = waits.now() + KILL_WAIT_MS;
  while (groupAlive(pgid) && waits.now() < killDeadline) await waits.sleep(EXIT_POLL_MS);
  return 'killed';
}

/** The environment variable that marks a process as started by svcd for one unit. */
export const UNIT_MARKER_ENV = 'SVC_UNIT';

/** True when pid carries SVC_UNIT=<unit> in its environment (so it is safe to kill as ours). */
export function processHasMarker(pid: number, unit: string): boolean {
  try {
    const env = readFileSync(`/proc/${pid}/environ`, 'utf8');
    return env.split('\0').includes(`${UNIT_MARKER_ENV}=${unit}`);
  } catch {
    return false;
  }
}

/**
 * Kills a group a previous svcd left behind (it crashed and its agents lived on), if it
 * still carries the unit's marker: pids are reused, and a stranger's group is left alone.
 */
export async function reapOrphanGroup(
  pgid: number,
  unit: string,
  graceMs: number,
  waits: Clock,
): Promise<boolean> {
  const members = groupMembers(pgid);
  if (!members.some((pid) => processHasMarker(pid, unit))) return false;
  await stopGroup(pgid, graceMs, waits);
  return true;
}
