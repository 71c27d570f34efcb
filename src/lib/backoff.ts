// Reconnect delays: start at 1 s, double to a cap of 30 s, with full jitter on the top half
// so a fleet of clients does not reconnect in lockstep after an outage.

export interface BackoffOptions {
  initialMs?: number;
  maxMs?: number;
  /** Random source in [0, 1); injected for deterministic tests. */
  random?: () => number;
}

export class Backoff {
  private attempt = 0;
  private readonly initialMs: number;
  private readonly maxMs: number;
  private readonly random: () => number;

  constructor(opts: BackoffOptions = {}) {
    this.initialMs = opts.initialMs ?? 1000;
    this.maxMs = opts.maxMs ?? 30_000;
    this.random = opts.random ?? Math.random;
  }

  /** The delay before the next attempt; each call doubles the base. */
  next(): number {
    const base = Math.min(this.maxMs, this.initialMs * 2 ** this.attempt);
    this.attempt++;
    return Math.round(base / 2 + (this.random() * base) / 2);
  }

  /** Back to the initial delay after a success. */
  reset(): void {
    this.attempt = 0;
  }

  get attempts(): number {
    return this.attempt;
  }
}
