// The one place that reads the wall clock. Everything time-dependent takes a Clock,
// so cron, leases and the watchdog are tested with FakeClock instead of real sleeps.

export interface TimerHandle {
  cancel(): void;
}

export interface Clock {
  /** Milliseconds since the epoch. */
  now(): number;
  /** Calls fn once after ms; the handle cancels it. */
  setTimeout(fn: () => void, ms: number): TimerHandle;
  /** Resolves after ms, or rejects with the signal's reason when aborted. */
  sleep(ms: number, signal?: AbortSignal): Promise<void>;
}

export const systemClock: Clock = {
  now: () => Date.now(),
  setTimeout(fn, ms) {
    const t = setTimeout(fn, ms);
    return { cancel: () => clearTimeout(t) };
  },
  sleep(ms, signal) {
    return sleepWith(systemClock, ms, signal);
  },
};

function sleepWith(clock: Clock, ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) {
      reject(signal.reason);
      return;
    }
    const onAbort = () => {
      handle.cancel();
      reject(signal?.reason);
    };
    const handle = clock.setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

/**
 * `base` shifted by `offsetMs` (timers keep base's pace). Test-only: svcd builds one from
 * SVC_TEST_CLOCK_OFFSET_MS so end-to-end tests can place a real daemon just before a minute
 * boundary instead of waiting for one.
 */
export function offsetClock(base: Clock, offsetMs: number): Clock {
  return {
    now: () => base.now() + offsetMs,
    setTimeout: (fn, ms) => base.setTimeout(fn, ms),
    sleep: (ms, signal) => base.sleep(ms, signal),
  };
}

interface FakeTimer {
  at: number;
  seq: number;
  fn: () => void;
}

/** A clock that moves only when told to; timers fire in time order during advance(). */
export class FakeClock implements Clock {
  private current: number;
  private timers: FakeTimer[] = [];
  private seq = 0;

  constructor(start: number | Date = 0) {
    this.current = typeof start === 'number' ? start : start.getTime();
  }

  now(): number {
    return this.current;
  }

  setTimeout(fn: () => void, ms: number): TimerHandle {
    const timer: FakeTimer = { at: this.current + Math.max(0, ms), seq: this.seq++, fn };
    this.timers.push(timer);
    return {
      cancel: () => {
        this.timers = this.timers.filter((t) => t !== timer);
      },
    };
  }

  sleep(ms: number, signal?: AbortSignal): Promise<void> {
    return sleepWith(this, ms, signal);
  }

  /** Number of timers waiting to fire. */
  pending(): number {
    return this.timers.length;
  }

  /**
   * Moves time forward by ms, firing every timer that falls due, in order, and letting
   * promise callbacks run between timers so chains of sleeps behave as in real time.
   */
  async advance(ms: number): Promise<void> {
    const target = this.current + ms;
    for (;;) {
      await flushMicrotasks();
      const next = this.nextDue(target);
      if (!next) break;
      this.timers = this.timers.filter((t) => t !== next);
      this.current = next.at;
      next.fn();
    }
    this.current = target;
    await flushMicrotasks();
  }

  /** Sets the time (forward only) and fires what fell due. */
  async set(to: number | Date): Promise<void> {
    const t = typeof to === 'number' ? to : to.getTime();
    if (t < this.current) throw new Error('FakeClock cannot go backwards');
    await this.advance(t - this.current);
  }

  private nextDue(limit: number): FakeTimer | undefined {
    let best: FakeTimer | undefined;
    for (const t of this.timers) {
      if (t.at > limit) continue;
      if (!best || t.at < best.at || (t.at === best.at && t.seq < best.seq)) best = t;
    }
    return best;
  }
}

async function flushMicrotasks(): Promise<void> {
  for (let i = 0; i < 10; i++) await Promise.resolve();
  await new Promise<void>((resolve) => setImmediate(resolve));
}

/** ISO 8601 UTC with milliseconds: the one timestamp format on the wire and in stores. */
export function iso(ms: number): string {
  return new Date(ms).toISOString();
}
