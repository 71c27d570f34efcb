// Runs a bash job: `bash -c <prompt>` in its own process group, stdout and stderr kept as a
// 4 KiB tail, the whole group killed on timeout (SIGTERM, then SIGKILL after a grace), on
// abort, and when bash exits (leftovers go with it). No TTY, no stdin.
import { spawn } from 'node:child_process';
import type { Clock, TimerHandle } from '../../lib/clock.js';

export const OUTPUT_TAIL_BYTES = 4096;
/** Between SIGTERM and SIGKILL of a job's process group. */
export const KILL_GRACE_MS = 5_000;

export interface BashResult {
  exitCode: number | null;
  /** Signal that ended bash, if any. */
  signal: NodeJS.Signals | null;
  timedOut: boolean;
  /** Aborted (svcd stopping). */
  aborted: boolean;
  durationMs: number;
  outputTail: string;
  /** Set when bash could not be started at all. */
  spawnError: string | null;
}

export interface BashOptions {
  command: string;
  timeoutMs: number;
  clock: Clock;
  env: NodeJS.ProcessEnv;
  cwd: string;
  signal?: AbortSignal;
  /** Called once bash is running (its pid is its process group id). */
  onStart?: (pid: number) => void;
}

/** The last `max` bytes of a stream, without holding more than about twice that. */
export class OutputTail {
  private chunks: Buffer[] = [];
  private size = 0;
  constructor(private readonly max = OUTPUT_TAIL_BYTES) {}

  push(chunk: Buffer): void {
    this.chunks.push(chunk);
    this.size += chunk.length;
    if (this.size > this.max * 2) this.compact();
  }

  text(): string {
    this.compact();
    // A cut through a multi-byte character shows as U+FFFD at the start; that is fine.
    return Buffer.concat(this.chunks).toString('utf8');
  }

  private compact(): void {
    const all = Buffer.concat(this.chunks);
    const kept = all.length > this.max ? all.subarray(all.length - this.max) : all;
    this.chunks = [Buffer.from(kept)];
    this.size = kept.length;
  }
}

export function runBash(opts: BashOptions): Promise<BashResult> {
  const { clock } = opts;
  const started = clock.now();
  const tail = new OutputTail();
  return new Promise((resolve) => {
    let timedOut = false;
    let aborted = false;
    let killTimer: TimerHandle | null = null;
    let graceTimer: TimerHandle | null = null;
    let settled = false;
    const child = spawn('bash', ['-c', opts.command], {
      cwd: opts.cwd,
      env: opts.env,
      detached: true, // its own process group, so a timeout kills what it started too
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const killGroup = (sig: NodeJS.Signals) => {
      if (child.pid === undefined) return;
      try {
        process.kill(-child.pid, sig);
      } catch {
        // the group is gone already
      }
    };
    const terminate = () => {
      killGroup('SIGTERM');
      graceTimer ??= clock.setTimeout(() => killGroup('SIGKILL'), KILL_GRACE_MS);
    };
    const onAbort = () => {
      aborted = true;
      terminate();
    };
    const done = (r: Omit<BashResult, 'durationMs' | 'outputTail' | 'timedOut' | 'aborted'>) => {
      if (settled) return;
      settled = true;
      killTimer?.cancel();
      graceTimer?.cancel();
      opts.signal?.removeEventListener('abort', onAbort);
      resolve({ ...r, timedOut, aborted, durationMs: clock.now() - started, outputTail: tail.text() });
    };
    child.stdout.on('data', (c: Buffer) => tail.push(c));
    child.stderr.on('data', (c: Buffer) => tail.push(c));
    child.once('error', (e) => done({ exitCode: null, signal: null, spawnError: e.message }));
    child.once('spawn', () => {
      if (child.pid !== undefined) opts.onStart?.(child.pid);
    });
    let exited = false;
    child.once('exit', () => {
      exited = true;
      // Like systemd's KillMode=control-group: what the job left behind in its group ends
      // with it, and with it the pipes those processes hold.
      killGroup('SIGKILL');
    });
    // 'close' waits for the pipes too, so the tail is complete.
    child.once('close', (code, signal) => done({ exitCode: code, signal, spawnError: null }));
    killTimer = clock.setTimeout(() => {
      timedOut = true;
      if (exited) {
        // Something that left the group (setsid) still holds our pipes: stop reading.
        child.stdout.destroy();
        child.stderr.destroy();
      } else {
        terminate();
      }
    }, opts.timeoutMs);
    if (opts.signal?.aborted) onAbort();
    else opts.signal?.addEventListener('abort', onAbort, { once: true });
  });
}
