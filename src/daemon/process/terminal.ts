// PTY agents (agents.toml pty = true): the agent runs in a pseudo-terminal held by svcd, its
// output goes to the rotating log and to any number of tap listeners. This is the surface
// the attach gateway builds on: listen to output, type input, resize, pause for flow control.
import { createRequire } from 'node:module';
import type * as NodePty from '@lydell/node-pty';
import type { ExitInfo } from './group.js';
import type { RotatingLog } from './rotating-log.js';

// node-pty (a native addon, CommonJS) is loaded with the first PTY agent, not at svcd's start.
const require = createRequire(import.meta.url);
let nodePty: typeof NodePty | null = null;

/** A running PTY agent as the attach gateway sees it. */
export interface AgentTerminal {
  readonly agentId: string;
  readonly pid: number;
  readonly cols: number;
  readonly rows: number;
  /** Raw terminal output as it arrives; returns the unsubscribe function. */
  onData(listener: (chunk: Buffer) => void): () => void;
  /** Called once when the agent exits (the terminal is then closed). */
  onExit(listener: (e: ExitInfo) => void): () => void;
  /** Input as typed by a viewer. */
  write(data: string | Buffer): void;
  resize(cols: number, rows: number): void;
  /** Flow control: stop reading the agent's output until resume() (the agent then blocks). */
  pause(): void;
  resume(): void;
}

export const DEFAULT_COLS = 120;
export const DEFAULT_ROWS = 40;

export class PtyTerminal implements AgentTerminal {
  private readonly dataListeners = new Set<(chunk: Buffer) => void>();
  private readonly exitListeners = new Set<(e: ExitInfo) => void>();
  private exitInfo: ExitInfo | null = null;
  readonly exited: Promise<ExitInfo>;
  private size = { cols: DEFAULT_COLS, rows: DEFAULT_ROWS };

  private constructor(
    readonly agentId: string,
    private readonly pty: NodePty.IPty,
    log: RotatingLog | null,
  ) {
    pty.onData((d: string | Buffer) => {
      const chunk = typeof d === 'string' ? Buffer.from(d) : d;
      log?.write(chunk);
      for (const l of this.dataListeners) {
        try {
          l(chunk);
        } catch {
          // a failing viewer must not stop the agent's output or the other viewers
        }
      }
    });
    this.exited = new Promise((resolve) => {
      pty.onExit(({ exitCode, signal }) => {
        const e: ExitInfo = { code: signal ? null : exitCode, signal: signal ? signalName(signal) : null };
        this.exitInfo = e;
        for (const l of this.exitListeners) {
          try {
            l(e);
          } catch {
            // see above
          }
        }
        this.exitListeners.clear();
        this.dataListeners.clear();
        resolve(e);
      });
    });
  }

  static spawn(o: {
    agentId: string;
    argv: string[];
    cwd: string;
    env: NodeJS.ProcessEnv;
    /** Where the output is kept; null when it is logged elsewhere (a tmux client: pipe-pane). */
    log: RotatingLog | null;
    cols?: number;
    rows?: number;
  }): PtyTerminal {
    const [file, ...args] = o.argv;
    if (!file) throw new Error('empty command');
    // node-pty's child calls setsid(): it leads its own session and process group.
    nodePty ??= require('@lydell/node-pty') as typeof NodePty;
    const pty = nodePty.spawn(file, args, {
      name: 'xterm-256color',
      cols: o.cols ?? DEFAULT_COLS,
      rows: o.rows ?? DEFAULT_ROWS,
      cwd: o.cwd,
      env: o.env,
      encoding: null,
    });
    const t = new PtyTerminal(o.agentId, pty, o.log);
    t.size = { cols: o.cols ?? DEFAULT_COLS, rows: o.rows ?? DEFAULT_ROWS };
    return t;
  }

  get pid(): number {
    return this.pty.pid;
  }
  get cols(): number {
    return this.size.cols;
  }
  get rows(): number {
    return this.size.rows;
  }
  get alive(): boolean {
    return this.exitInfo === null;
  }

  onData(listener: (chunk: Buffer) => void): () => void {
    if (this.exitInfo) return () => {};
    this.dataListeners.add(listener);
    return () => this.dataListeners.delete(listener);
  }

  onExit(listener: (e: ExitInfo) => void): () => void {
    if (this.exitInfo) {
      listener(this.exitInfo);
      return () => {};
    }
    this.exitListeners.add(listener);
    return () => this.exitListeners.delete(listener);
  }

  write(data: string | Buffer): void {
    if (this.exitInfo) return;
    // The typings say string, but the write goes straight to the PTY's socket, which takes
    // bytes: terminal input is not always valid UTF-8 and must reach the program unchanged.
    (this.pty.write as (this: unknown, d: string | Buffer) => void).call(this.pty, data);
  }

  resize(cols: number, rows: number): void {
    if (this.exitInfo) return;
    const c = clampSize(cols, 2, 1000);
    const r = clampSize(rows, 1, 500);
    try {
      this.pty.resize(c, r);
    } catch {
      // The PTY closed before its exit was reported (EBADF): nothing left to resize.
      return;
    }
    this.size = { cols: c, rows: r };
  }

  /** Ends the terminal's process (a tmux client: detaches it; the agent's pane lives on). */
  hangUp(): void {
    if (this.exitInfo) return;
    try {
      this.pty.kill('SIGHUP');
    } catch {
      // already gone; its exit is on the way
    }
  }

  pause(): void {
    if (!this.exitInfo) this.pty.pause();
  }

  resume(): void {
    if (!this.exitInfo) this.pty.resume();
  }
}

function clampSize(n: number, min: number, max: number): number {
  return Number.isFinite(n) ? Math.min(max, Math.max(min, Math.floor(n))) : min;
}

const SIGNALS: Record<number, string> = { 1: 'SIGHUP', 2: 'SIGINT', 9: 'SIGKILL', 15: 'SIGTERM' };
function signalName(n: number): string {
  return SIGNALS[n] ?? `signal ${n}`;
}
