// Per-principal fixed-window rate limit, kept in memory per replica. take() decides and
// counts one request; peek() reports the block without counting (for feed events).
import type { RateLimitBlock } from '../../protocol/events.js';

export interface RateLimitConfig {
  /** Requests per window; 0 disables limiting. */
  limit: number;
  windowMs: number;
}

export interface RateDecision {
  allowed: boolean;
  limit: number;
  remaining: number;
  /** Window end, ms since epoch. */
  resetAt: number;
}

interface Window {
  start: number;
  count: number;
}

export class RateLimiter {
  private windows = new Map<string, Window>();
  private lastSweep = 0;

  constructor(private readonly config: RateLimitConfig) {}

  get enabled(): boolean {
    return this.config.limit > 0;
  }

  take(key: string, now: number): RateDecision {
    const w = this.window(key, now);
    const allowed = !this.enabled || w.count < this.config.limit;
    if (allowed) w.count++;
    return this.decision(w, allowed);
  }

  peek(key: string, now: number): RateDecision {
    return this.decision(this.window(key, now), true);
  }

  /** The block for feed events, or null when limiting is off (nothing to report). */
  block(key: string, now: number): RateLimitBlock | null {
    if (!this.enabled) return null;
    const d = this.peek(key, now);
    return { limit: d.limit, remaining: d.remaining, reset_at: new Date(d.resetAt).toISOString() };
  }

  private window(key: string, now: number): Window {
    const start = now - (now % this.config.windowMs);
    if (now - this.lastSweep > this.config.windowMs) this.sweep(start);
    let w = this.windows.get(key);
    if (!w || w.start !== start) {
      w = { start, count: 0 };
      this.windows.set(key, w);
    }
    return w;
  }

  private decision(w: Window, allowed: boolean): RateDecision {
    const limit = this.enabled ? this.config.limit : 0;
    return {
      allowed,
      limit,
      remaining: this.enabled ? Math.max(0, limit - w.count) : 0,
      resetAt: w.start + this.config.windowMs,
    };
  }

  private sweep(currentStart: number): void {
    this.lastSweep = currentStart;
    for (const [k, w] of this.windows) if (w.start < currentStart) this.windows.delete(k);
  }
}
