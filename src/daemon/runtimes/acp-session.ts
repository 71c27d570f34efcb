// A persistent ACP session with one agent process (runtime alpha_agent_acp): spawn in its
// own process group, initialize, session/new, then prompts one at a time. Session updates
// become ProgressUpdates (to the current prompt's listener, else the session's); stderr
// and the agent's text go to the rotating log. Used by supervised ACP agents and by
// one-shot runs (runner.ts) alike.
import type { ChildProcess } from 'node:child_process';
import { Readable, Writable } from 'node:stream';
import type * as AcpSdk from '@agentclientprotocol/sdk';
import type { Clock } from '../../lib/clock.js';
import { SvcError } from '../../protocol/errors.js';
import { type ExitInfo, spawnGroup, stopGroup } from '../process/group.js';
import { OutputTail, type RotatingLog } from '../process/rotating-log.js';
import { allowEverything, type PermissionHandler } from './permission.js';
import { ProgressCoalescer, type ProgressUpdate, progressOfAcpUpdate } from './progress.js';

// The ACP SDK (and zod with it) is loaded with the first ACP session, not at svcd's start:
// a node without ACP agents never pays its memory.
let acp: typeof AcpSdk;
const loadAcp = async () => {
  acp ??= await import('@agentclientprotocol/sdk');
};

export interface AcpSessionOptions {
  argv: string[];
  cwd: string;
  env: NodeJS.ProcessEnv;
  log: RotatingLog | null;
  /** Coalescing timers (may be fake in tests). */
  clock: Clock;
  /** Real-time waits: start timeout, stop grace. */
  waits: Clock;
  stopGraceMs: number;
  /** How long initialize + session/new may take before the agent is declared broken. */
  startTimeoutMs?: number;
  /** Updates that arrive while no prompt is running. */
  onProgress?(u: ProgressUpdate): void;
  onExit?(e: ExitInfo): void;
  /** Answers session/request_permission; default: allow (headless supervised agents). */
  permission?: PermissionHandler;
}

export interface PromptOutcome {
  /** end_turn | max_tokens | max_turn_requests | refusal | cancelled; null when it failed. */
  stopReason: string | null;
  /** The agent's message text of this turn (last 8 KiB). */
  text: string;
  /** Why the prompt failed (agent error, agent exited), else null. */
  error: string | null;
}

export interface PromptOptions {
  onProgress?(u: ProgressUpdate): void;
  signal?: AbortSignal;
}

const CLIENT_INFO = { name: 'svcd', version: '1' };

export class AcpSession {
  private queue: Promise<unknown> = Promise.resolve();
  private current: { coalescer: ProgressCoalescer; text: OutputTail; signal: AbortSignal } | null = null;
  /** Aborted at stop: pending permission requests end as cancelled. */
  private readonly stopped = new AbortController();
  private readonly idle: ProgressCoalescer;
  private exitInfo: ExitInfo | null = null;
  private stopping: Promise<void> | null = null;

  private constructor(
    private readonly o: AcpSessionOptions,
    private readonly child: ChildProcess,
    private readonly conn: AcpSdk.ClientConnection,
    private sid: string,
    readonly exited: Promise<ExitInfo>,
  ) {
    this.idle = new ProgressCoalescer((u) => this.deliver(u, o.onProgress), o.clock);
    exited.then((e) => {
      this.exitInfo = e;
    });
  }

  get pid(): number {
    return this.child.pid ?? -1;
  }

  get sessionId(): string {
    return this.sid;
  }

  get alive(): boolean {
    return this.exitInfo === null;
  }

  /** Spawns the agent and opens a session; rejects (with the agent stopped) when it cannot. */
  static async start(o: AcpSessionOptions): Promise<AcpSession> {
    await loadAcp();
    const child = spawnGroup(o.argv, { cwd: o.cwd, env: o.env, stdin: 'pipe' });
    const exited = new Promise<ExitInfo>((resolve) => {
      child.once('exit', (code, signal) => resolve({ code, signal }));
      child.once('error', () => resolve({ code: null, signal: null }));
    });
    const spawnFailed = new Promise<string>((resolve) => child.once('error', (e) => resolve(e.message)));
    child.stderr?.on('data', (chunk: Buffer) => o.log?.write(chunk));
    child.stdin?.on('error', () => {});
    let self: AcpSession | null = null;
    const app = acp
      .client({ name: 'svcd' })
      .onNotification(acp.methods.client.session.update, ({ params }) => {
        self?.onUpdate(params.update);
      })
      .onRequest(acp.methods.client.session.requestPermission, async ({ params }) => {
        const title = params.toolCall.title ?? params.toolCall.toolCallId;
        // Requests outside a prompt (none are expected) and after stop are cancelled at once.
        const signal = self?.permissionSignal() ?? AbortSignal.abort();
        const outcome = await (o.permission ?? allowEverything)(params, signal).catch(
          (e: unknown): { outcome: 'cancelled' } => {
            o.log?.write(`[permission] ${title}: ${errorText(e)}\n`);
            return { outcome: 'cancelled' };
          },
        );
        const chosen =
          outcome.outcome === 'selected'
            ? (params.options.find((p) => p.optionId === outcome.optionId)?.kind ?? outcome.optionId)
            : 'cancelled';
        o.log?.write(`[permission] ${title}: ${chosen}\n`);
        return { outcome };
      });
    if (!child.stdin || !child.stdout) throw new Error('agent stdio not piped');
    const conn = app.connect(
      acp.ndJsonStream(
        Writable.toWeb(child.stdin) as WritableStream<Uint8Array>,
        Readable.toWeb(child.stdout) as ReadableStream<Uint8Array>,
      ),
    );
    const abort = new AbortController();
    const handshake = (async () => {
      await conn.agent.request(acp.methods.agent.initialize, {
        protocolVersion: acp.PROTOCOL_VERSION,
        clientCapabilities: {},
        clientInfo: CLIENT_INFO,
      });
      const s = await conn.agent.request(acp.methods.agent.session.new, { cwd: o.cwd, mcpServers: [] });
      return s.sessionId;
    })();
    const timeoutMs = o.startTimeoutMs ?? 30_000;
    try {
      const sid = await Promise.race([
        handshake,
        spawnFailed.then((m) => {
          throw new SvcError('unavailable', `cannot start ACP agent ${o.argv[0]}: ${m}`);
        }),
        exited.then((e) => {
          throw new SvcError('unavailable', `ACP agent exited during initialize (${describeExit(e)})`);
        }),
        o.waits.sleep(timeoutMs, abort.signal).then(() => {
          throw new SvcError(
            'unavailable',
            `ACP agent did not complete initialize and session/new within ${timeoutMs} ms: is ${o.argv[0]} an ACP agent?`,
          );
        }),
      ]);
      abort.abort();
      self = new AcpSession(o, child, conn, sid, exited);
      exited.then((e) => {
        conn.close();
        o.onExit?.(e);
      });
      return self;
    } catch (e) {
      abort.abort();
      handshake.catch(() => {});
      if (e instanceof SvcError) {
        conn.close();
        if (child.pid !== undefined) await stopGroup(child.pid, o.stopGraceMs, o.waits);
        throw e;
      }
      // A write to an agent that already exited fails (EPIPE) before its exit is seen: the
      // exit is the better explanation, so give it a moment to arrive.
      const gone = new AbortController();
      const exit = await Promise.race([
        exited,
        o.waits.sleep(500, gone.signal).then(
          () => null,
          () => null,
        ),
      ]);
      gone.abort();
      conn.close();
      if (child.pid !== undefined) await stopGroup(child.pid, o.stopGraceMs, o.waits);
      if (exit)
        throw new SvcError('unavailable', `ACP agent exited during initialize (${describeExit(exit)})`);
      throw new SvcError('unavailable', `ACP agent failed to start a session: ${errorText(e)}`);
    }
  }

  /** Sends a prompt; prompts queue behind each other. Never rejects: failures are in the outcome. */
  prompt(text: string, opts: PromptOptions = {}): Promise<PromptOutcome> {
    const run = async (): Promise<PromptOutcome> => {
      if (!this.alive)
        return { stopReason: null, text: '', error: `agent exited (${describeExit(this.exitInfo)})` };
      this.idle.flush();
      const tail = new OutputTail(8192);
      const coalescer = new ProgressCoalescer(
        (u) => this.deliver(u, opts.onProgress ?? this.o.onProgress),
        this.o.clock,
      );
      const signal = opts.signal ? AbortSignal.any([opts.signal, this.stopped.signal]) : this.stopped.signal;
      this.current = { coalescer, text: tail, signal };
      const onAbort = () => {
        void this.conn.agent
          .notify(acp.methods.agent.session.cancel, { sessionId: this.sid })
          .catch(() => {});
      };
      if (opts.signal?.aborted) onAbort();
      opts.signal?.addEventListener('abort', onAbort, { once: true });
      this.o.log?.write(`[prompt] ${text}\n`);
      try {
        const res = await Promise.race([
          this.conn.agent.request(acp.methods.agent.session.prompt, {
            sessionId: this.sid,
            prompt: [{ type: 'text', text }],
          }),
          this.exited.then((e) => {
            throw new Error(`agent exited (${describeExit(e)})`);
          }),
        ]);
        coalescer.flush();
        return { stopReason: res.stopReason, text: tail.text(), error: null };
      } catch (e) {
        coalescer.flush();
        return { stopReason: null, text: tail.text(), error: errorText(e) };
      } finally {
        opts.signal?.removeEventListener('abort', onAbort);
        this.current = null;
      }
    };
    const p = this.queue.then(run, run);
    this.queue = p;
    return p;
  }

  /** Closes the connection and stops the agent's whole process group. Idempotent. */
  stop(): Promise<void> {
    this.stopping ??= (async () => {
      this.stopped.abort();
      this.idle.flush();
      this.conn.close();
      if (this.child.pid !== undefined) await stopGroup(this.child.pid, this.o.stopGraceMs, this.o.waits);
      await this.exited;
    })();
    return this.stopping;
  }

  /** The running prompt's signal, for a permission request that arrives during it. */
  permissionSignal(): AbortSignal | null {
    return this.current?.signal ?? null;
  }

  private onUpdate(update: AcpSdk.SessionUpdate): void {
    const u = progressOfAcpUpdate(update);
    if (this.current) {
      if (u.kind === 'message' && u.text !== undefined) this.current.text.push(u.text);
      this.current.coalescer.push(u);
    } else {
      this.idle.push(u);
    }
  }

  private deliver(u: ProgressUpdate, to: ((u: ProgressUpdate) => void) | undefined): void {
    if (u.text !== undefined) this.o.log?.write(`[${u.kind}] ${u.text}${u.text.endsWith('\n') ? '' : '\n'}`);
    to?.(u);
  }
}

export function describeExit(e: ExitInfo | null): string {
  if (!e) return 'running';
  if (e.signal) return `killed by ${e.signal}`;
  return `exit code ${e.code}`;
}

function errorText(e: unknown): string {
  if (acp && e instanceof acp.RequestError) {
    // "Internal error" alone says nothing: the agent's details are what an operator acts on.
    const details = (e.data as { details?: unknown } | undefined)?.details;
    return typeof details === 'string' && details !== ''
      ? `${e.message} (${details.slice(0, 500)})`
      : e.message;
  }
  if (e instanceof Error) return e.message;
  return String(e);
}
