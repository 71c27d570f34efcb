// One run of a CLI agent: spawn in its own process group, capture output (rotating log +
// bounded tail), deliver the prompt on stdin when the template does not take it as an
// argument, enforce the timeout and cancellation by stopping the whole group, and leave no
// process of the group behind when the agent itself has exited.
import type { Clock } from '../../lib/clock.js';
import { spawnGroup, stopGroup } from '../process/group.js';
import { OutputTail, type RotatingLog } from '../process/rotating-log.js';

export interface CliRunOptions {
  argv: string[];
  cwd: string;
  env: NodeJS.ProcessEnv;
  /** Written to stdin, which is then closed; without it stdin is /dev/null. */
  stdin?: string;
  log: RotatingLog | null;
  timeoutMs?: number;
  signal?: AbortSignal;
  stopGraceMs: number;
  /** Measures the timeout (may be fake in tests). */
  clock: Clock;
  /** Real-time waits for process exit. */
  waits: Clock;
  onSpawn?(pid: number): void;
}

export interface CliOutcome {
  pid: number | null;
  exitCode: number | null;
  signal: string | null;
  timedOut: boolean;
  cancelled: boolean;
  /** Why the process could not start (ENOENT …), else null. */
  spawnError: string | null;
  outputTail: string;
}

export async function runCli(o: CliRunOptions): Promise<CliOutcome> {
  const tail = new OutputTail(8192);
  const outcome: CliOutcome = {
    pid: null,
    exitCode: null,
    signal: null,
    timedOut: false,
    cancelled: false,
    spawnError: null,
    outputTail: '',
  };
  if (o.signal?.aborted) {
    outcome.cancelled = true;
    return outcome;
  }
  let child: ReturnType<typeof spawnGroup>;
  try {
    child = spawnGroup(o.argv, { cwd: o.cwd, env: o.env, stdin: o.stdin === undefined ? 'ignore' : 'pipe' });
  } catch (e) {
    outcome.spawnError = (e as Error).message;
    return outcome;
  }
  const onData = (chunk: Buffer) => {
    tail.push(chunk);
    o.log?.write(chunk);
  };
  child.stdout?.on('data', onData);
  child.stderr?.on('data', onData);
  if (o.stdin !== undefined && child.stdin) {
    child.stdin.on('error', () => {}); // an agent that never reads its stdin is not an error
    child.stdin.end(o.stdin);
  }
  const closed = new Promise<void>((resolve) => child.once('close', () => resolve()));
  const exited = new Promise<void>((resolve) => {
    child.once('exit', (code, sig) => {
      outcome.exitCode = code;
      outcome.signal = sig;
      resolve();
    });
    child.once('error', (e) => {
      outcome.spawnError = e.message;
      resolve();
    });
  });
  const pid = child.pid ?? null;
  outcome.pid = pid;

  let stopping: Promise<unknown> | null = null;
  const stop = () => {
    if (pid !== null) stopping ??= stopGroup(pid, o.stopGraceMs, o.waits);
  };
  const timer =
    o.timeoutMs !== undefined
      ? o.clock.setTimeout(() => {
          outcome.timedOut = true;
          stop();
        }, o.timeoutMs)
      : null;
  const onAbort = () => {
    outcome.cancelled = true;
    stop();
  };
  o.signal?.addEventListener('abort', onAbort, { once: true });
  if (pid !== null) o.onSpawn?.(pid);
  if (o.signal?.aborted && !outcome.cancelled) onAbort();
  try {
    await exited;
    // The agent is gone; whatever it left running in its group goes with it.
    stop();
    await stopping;
    if (outcome.spawnError === null) await closed;
  } finally {
    timer?.cancel();
    o.signal?.removeEventListener('abort', onAbort);
  }
  outcome.outputTail = tail.text();
  return outcome;
}
