// The rate-limit hold (docs/fanout.md, Rate limit): while the upstream's
// rate_limit.remaining is 0, tower events are held, not relayed, until reset_at plus a margin;
// then everything held goes out in arrival order. Decides with the injected clock only.
import type { Clock, TimerHandle } from '../../lib/clock.js';
import { iso } from '../../lib/clock.js';
import type { FeedEvent } from '../../protocol/events.js';

export interface ThrottleRecord {
  /** When the hold began (field names as svc system doctor reads them). */
  since: string;
  /** The upstream's reset_at that started (or last extended) the hold. */
  reset_at: string;
  /** When held events are (or were) released: reset_at + margin. */
  until: string;
  held: number;
  /** When held events went out; null while holding. */
  resumed_at: string | null;
}

export interface RateHoldOptions {
  clock: Clock;
  marginMs: number;
  /** Receives released events, oldest first, in one call per release. */
  release(events: FeedEvent[]): void;
  /** History entries kept for `fanout.status` (svc system doctor). */
  historySize?: number;
}

export class RateHold {
  private queue: FeedEvent[] = [];
  private untilMs = 0;
  private timer: TimerHandle | null = null;
  private current: ThrottleRecord | null = null;
  private readonly history: ThrottleRecord[] = [];
  private waiters: (() => void)[] = [];
  totalHeld = 0;

  constructor(private readonly opts: RateHoldOptions) {}

  get holding(): boolean {
    return this.timer !== null;
  }

  get heldCount(): number {
    return this.queue.length;
  }

  /** Offers an upstream event: 'pass' = relay it now; 'held' = the hold keeps it. */
  offer(ev: FeedEvent): 'pass' | 'held' {
    const until = this.exhaustedUntil(ev);
    if (this.timer === null) {
      if (until === null) return 'pass';
      this.start(until, ev);
    } else if (until !== null && until > this.untilMs) {
      this.extend(until, ev);
    }
    this.queue.push(ev);
    this.totalHeld++;
    if (this.current) this.current.held++;
    return 'held';
  }

  /** Resolves when no hold is active (at once if none is). */
  whenReleased(): Promise<void> {
    if (this.timer === null) return Promise.resolve();
    return new Promise((resolve) => this.waiters.push(resolve));
  }

  status(): { holding: boolean; held: number; until: string | null; total_held: number } {
    return {
      holding: this.holding,
      held: this.queue.length,
      until: this.holding ? iso(this.untilMs) : null,
      total_held: this.totalHeld,
    };
  }

  /** The last holds, oldest first. */
  throttles(): ThrottleRecord[] {
    return this.history.map((r) => ({ ...r }));
  }

  /** Stops the timer; what is held is released at once (stop order: before consumers close). */
  stop(): void {
    if (this.timer) this.flush();
  }

  /** reset_at + margin when this event says the quota is spent and the window is still ahead, else null. */
  private exhaustedUntil(ev: FeedEvent): number | null {
    const rl = ev.rate_limit;
    if (!rl || rl.remaining > 0) return null;
    const resetAt = Date.parse(rl.reset_at);
    // An unreadable reset_at cannot be waited for: relay rather than hold forever.
    if (Number.isNaN(resetAt)) return null;
    const until = resetAt + this.opts.marginMs;
    return until > this.opts.clock.now() ? until : null;
  }

  private start(until: number, ev: FeedEvent): void {
    this.current = {
      since: iso(this.opts.clock.now()),
      reset_at: ev.rate_limit?.reset_at ?? '',
      until: iso(until),
      held: 0,
      resumed_at: null,
    };
    this.history.push(this.current);
    if (this.history.length > (this.opts.historySize ?? 50)) this.history.shift();
    this.arm(until);
  }

  private extend(until: number, ev: FeedEvent): void {
    this.timer?.cancel();
    if (this.current) {
      this.current.reset_at = ev.rate_limit?.reset_at ?? this.current.reset_at;
      this.current.until = iso(until);
    }
    this.arm(until);
  }

  private arm(until: number): void {
    this.untilMs = until;
    this.timer = this.opts.clock.setTimeout(() => this.flush(), until - this.opts.clock.now());
  }

  private flush(): void {
    this.timer?.cancel();
    this.timer = null;
    const events = this.queue;
    this.queue = [];
    if (this.current) this.current.resumed_at = iso(this.opts.clock.now());
    this.current = null;
    if (events.length > 0) this.opts.release(events);
    const w = this.waiters;
    this.waiters = [];
    for (const r of w) r();
  }
}
