// Whether the store takes writes: the last write fault (full, read-only, busy, I/O) until a
// write succeeds again. /readyz answers 503 while there is one; the transition into and out
// of a fault is logged once, naming the cause and the store's file, not once per request.
import type { Clock } from '../../lib/clock.js';
import { iso } from '../../lib/clock.js';
import type { Logger } from '../../lib/log.js';
import { FAULT_ANSWER, isWriteFault, type StoreFault } from './faults.js';

export interface WriteFault extends StoreFault {
  /** When writes started failing (ISO 8601). */
  since: string;
  /** Writes refused since. */
  failures: number;
}

export class StoreHealth {
  private fault: WriteFault | null = null;

  constructor(
    private readonly deps: {
      clock: Clock;
      log: Logger;
      /** The store as logs name it: "sqlite /var/lib/svc/tower/tower.db", "postgres host/db". */
      describe: string;
    },
  ) {}

  /** The current write fault, or null when writes work (as far as the last write knows). */
  writeFault(): WriteFault | null {
    return this.fault;
  }

  /** A write failed with `f`; only write faults change the state (others are transient). */
  failed(f: StoreFault): void {
    if (!isWriteFault(f)) return;
    if (this.fault && this.fault.kind === f.kind && this.fault.cause === f.cause) {
      this.fault.failures++;
      return;
    }
    this.fault = { ...f, since: iso(this.deps.clock.now()), failures: 1 };
    this.deps.log.error(
      { code: FAULT_ANSWER[f.kind].code, cause: f.cause, store: this.deps.describe, err: f.message },
      `${FAULT_ANSWER[f.kind].what} (${f.cause}: ${f.message}) at ${this.deps.describe}: writes answer 503 until it is fixed; reads and the feed keep serving`,
    );
  }

  /** A write committed: the store takes writes again. */
  succeeded(): void {
    const f = this.fault;
    if (!f) return;
    this.fault = null;
    this.deps.log.warn(
      { cause: f.cause, store: this.deps.describe, since: f.since, refused: f.failures },
      `the store takes writes again (${f.cause} since ${f.since}, ${f.failures} writes refused)`,
    );
  }
}
