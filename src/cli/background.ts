// Starting svc's own processes in the background (`svc up`'s tower and svcd, `svc daemon up`'s
// svcd): a detached child writing to a log file, and the wait until it is ready. The wait ends
// as soon as the child exits, with its exit status and what it logged, instead of running out
// its timeout (a port in use or a wrong Node.js ABI used to take the whole 30 s).
import { spawn } from 'node:child_process';
import { closeSync, openSync, readFileSync, statSync } from 'node:fs';
import type { Clock } from '../lib/clock.js';
import { SvcError } from '../protocol/errors.js';

export interface Detached {
  pid: number;
  log: string;
  /** The exit code (or signal name) once the child has exited, else null. */
  exited(): number | string | null;
  /** What the child wrote to its log since it was started. */
  output(): string;
}

/** Starts `argv` detached from this process, stdout and stderr appended to `log`. */
export function startDetached(o: { argv: string[]; env: NodeJS.ProcessEnv; log: string }): Detached {
  const mark = sizeOf(o.log);
  const fd = openSync(o.log, 'a', 0o600);
  const [cmd, ...args] = o.argv as [string, ...string[]];
  let exit: number | string | null = null;
  const child = spawn(cmd, args, { env: o.env, detached: true, stdio: ['ignore', fd, fd] });
  closeSync(fd); // the child holds its own descriptor
  child.once('exit', (code, signal) => {
    exit = code ?? signal ?? -1;
  });
  child.once('error', (e) => {
    exit = (e as NodeJS.ErrnoException).code ?? e.message;
  });
  child.unref();
  return {
    pid: child.pid ?? -1,
    log: o.log,
    exited: () => exit,
    output: () => {
      try {
        return readFileSync(o.log).subarray(mark).toString('utf8').trim();
      } catch {
        return '';
      }
    },
  };
}

function sizeOf(file: string): number {
  try {
    return statSync(file).size;
  } catch {
    return 0;
  }
}

/** The last `n` lines of a log file, as a paragraph to append to an error, or ''. */
export function logTail(file: string, n = 15): string {
  try {
    const lines = readFileSync(file, 'utf8').trim().split('\n');
    return `\nlast lines of ${file}:\n${lines.slice(-n).join('\n')}`;
  } catch {
    return '';
  }
}

export interface WaitReady<T> {
  /** What is starting, for messages ("the tower", "svcd"). */
  what: string;
  /** The child, when this process started it (null: started by systemd). */
  child: Detached | null;
  timeoutMs: number;
  clock: Clock;
  /** The ready value, or null (or a throw) while not ready. */
  ready: () => Promise<T | null>;
  /** The error for a child that exited before it was ready (default: unavailable, its output). */
  onExit?: (exit: number | string, output: string) => SvcError;
  /** Appended to the timeout message (e.g. the log's tail). */
  hint?: () => string;
}

/** Polls `ready` until it answers, the child exits (thrown at once) or the timeout passes. */
export async function waitReady<T>(o: WaitReady<T>): Promise<T> {
  const deadline = o.clock.now() + o.timeoutMs;
  for (;;) {
    // The exit first: a child that exited is never ready, whatever a stale socket answers.
    const exit = o.child?.exited() ?? null;
    if (exit !== null) {
      const output = (o.child as Detached).output();
      throw o.onExit ? o.onExit(exit, output) : exitedError(o.what, exit, output);
    }
    const v = await o.ready().catch(() => null);
    if (v !== null) return v;
    if (o.clock.now() > deadline) {
      throw new SvcError(
        'unavailable',
        `${o.what} did not come up within ${o.timeoutMs / 1000} s${o.hint?.() ?? ''}`,
      );
    }
    await o.clock.sleep(100);
  }
}

export function exitedError(what: string, exit: number | string, output: string): SvcError {
  return new SvcError(
    'unavailable',
    `${what} exited at start (${typeof exit === 'number' ? `exit code ${exit}` : exit})${output ? `:\n${output}` : ''}`,
  );
}
