// One work loop (`svc run`): claims mesh tasks for one enrolled agent and runs each through
// `execute` (an ephemeral subagent), at most maxConcurrent at once. It claims once at start,
// on every wake() (task_ready), whenever a subagent finishes, and on a periodic poll, so a
// lost or late task_ready delays work by at most one poll interval and never strands it.
import type { Clock, TimerHandle } from '../../lib/clock.js';
import { iso } from '../../lib/clock.js';
import type { Logger } from '../../lib/log.js';
import type { Lease, MeshWorkApi } from './mesh-api.js';
import type { StopReason, SubagentOutcome } from './subagent.js';

export type WakeReason = 'start' | 'task_ready' | 'poll' | 'slot_free';

export interface ClaimLoopOptions {
  agentId: string;
  maxConcurrent: number;
  pollMs: number;
  api: Pick<MeshWorkApi, 'claim'>;
  clock: Clock;
  log: Logger;
  /** Runs one claimed task to its end; aborting `signal` (with a StopReason) stops it. */
  execute(lease: Lease, signal: AbortSignal): Promise<SubagentOutcome>;
  /** Told about every finished task (status, events). */
  onOutcome?(o: SubagentOutcome): void;
}

export interface ClaimRecord {
  task_id: string;
  /** What made the loop look for work, and when. */
  wake: WakeReason;
  woken_at: string;
  claimed_at: string;
}

export interface ClaimLoopStatus {
  agent_id: string;
  max_concurrent: number;
  poll_interval_ms: number;
  running: { task_id: string; title: string; attempt: number; started_at: string }[];
  counts: { claimed: number; completed: number; failed: number; cancelled: number; abandoned: number };
  last_poll_at: string | null;
  last_error: string | null;
  /** The last RECENT_CLAIMS claims, oldest first. */
  recent_claims: ClaimRecord[];
}

const RECENT_CLAIMS = 50;

export class ClaimLoop {
  private readonly running = new Map<
    string,
    { ctl: AbortController; done: Promise<void>; lease: Lease; startedAt: number }
  >();
  private readonly counts = { claimed: 0, completed: 0, failed: 0, cancelled: 0, abandoned: 0 };
  private readonly recent: ClaimRecord[] = [];
  private filling: Promise<void> | null = null;
  /** A wake-up that arrived while a fill was under way: fill once more after it. */
  private pendingWake: { reason: WakeReason; at: number } | null = null;
  private pollTimer: TimerHandle | null = null;
  private stopping = false;
  private lastPollAt: number | null = null;
  private lastError: string | null = null;

  private maxConcurrent: number;

  constructor(private readonly o: ClaimLoopOptions) {
    this.maxConcurrent = o.maxConcurrent;
  }

  /** A new limit applies from the next claim (running subagents are not stopped). */
  setMaxConcurrent(n: number): void {
    this.maxConcurrent = n;
    this.wake('slot_free');
  }

  start(): void {
    this.armPoll();
    this.wake('start');
  }

  /** Look for work now. Cheap to call often: concurrent calls coalesce into one more fill. */
  wake(reason: WakeReason): void {
    if (this.stopping) return;
    const at = this.o.clock.now();
    if (this.filling) {
      this.pendingWake ??= { reason, at };
      return;
    }
    this.filling = this.fill(reason, at).finally(() => {
      this.filling = null;
      const next = this.pendingWake;
      this.pendingWake = null;
      if (next && !this.stopping) this.wake(next.reason);
    });
  }

  /** Stops the subagent of a task this loop runs; false when it runs none for that task. */
  cancelTask(taskId: string, reason: StopReason = 'cancelled'): boolean {
    const r = this.running.get(taskId);
    if (!r) return false;
    r.ctl.abort(reason);
    return true;
  }

  runs(taskId: string): boolean {
    return this.running.has(taskId);
  }

  get size(): number {
    return this.running.size;
  }

  /**
   * Stops claiming. drain: wait for running subagents to finish; otherwise stop them now
   * (their tasks are not reported: the leases expire and the tasks are claimed again).
   */
  async stop(opts: { drain?: boolean } = {}): Promise<void> {
    this.stopping = true;
    this.pollTimer?.cancel();
    this.pollTimer = null;
    await this.filling;
    if (!opts.drain) for (const r of this.running.values()) r.ctl.abort('shutdown' satisfies StopReason);
    await Promise.all([...this.running.values()].map((r) => r.done));
  }

  status(): ClaimLoopStatus {
    return {
      agent_id: this.o.agentId,
      max_concurrent: this.maxConcurrent,
      poll_interval_ms: this.o.pollMs,
      running: [...this.running.values()].map((r) => ({
        task_id: r.lease.task.id,
        title: r.lease.task.title,
        attempt: r.lease.task.attempt,
        started_at: iso(r.startedAt),
      })),
      counts: { ...this.counts },
      last_poll_at: this.lastPollAt === null ? null : iso(this.lastPollAt),
      last_error: this.lastError,
      recent_claims: [...this.recent],
    };
  }

  private armPoll(): void {
    if (this.stopping) return;
    this.pollTimer = this.o.clock.setTimeout(() => {
      this.lastPollAt = this.o.clock.now();
      this.wake('poll');
      this.armPoll();
    }, this.o.pollMs);
  }

  private async fill(reason: WakeReason, wokenAt: number): Promise<void> {
    while (!this.stopping && this.running.size < this.maxConcurrent) {
      let lease: Lease | null;
      try {
        lease = await this.o.api.claim(this.o.agentId);
      } catch (e) {
        // The next wake-up or poll tries again.
        this.lastError = (e as Error).message;
        this.o.log.warn({ err: e }, 'claim failed');
        return;
      }
      this.lastError = null;
      if (!lease) return;
      if (this.stopping) {
        // Claimed while stopping: not run; its lease expires and it returns to pending.
        return;
      }
      this.launch(lease, reason, wokenAt);
    }
  }

  private launch(lease: Lease, reason: WakeReason, wokenAt: number): void {
    const taskId = lease.task.id;
    const now = this.o.clock.now();
    this.counts.claimed++;
    this.recent.push({
      task_id: taskId,
      wake: reason,
      woken_at: iso(wokenAt),
      claimed_at: iso(now),
    });
    if (this.recent.length > RECENT_CLAIMS) this.recent.shift();
    const ctl = new AbortController();
    const done = this.o
      .execute(lease, ctl.signal)
      .then(
        (out) => {
          this.counts[out.state]++;
          try {
            this.o.onOutcome?.(out);
          } catch (e) {
            this.o.log.error({ err: e }, 'outcome listener failed');
          }
        },
        (e: unknown) => {
          // execute reports its own failures; reaching here is a bug, logged and counted.
          this.counts.abandoned++;
          this.o.log.error({ err: e, task_id: taskId }, 'subagent executor threw');
        },
      )
      .finally(() => {
        this.running.delete(taskId);
        this.wake('slot_free');
      });
    this.running.set(taskId, { ctl, done, lease, startedAt: now });
  }
}
