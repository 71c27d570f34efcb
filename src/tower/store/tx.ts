// The tower's one way to change state: a transaction that also appends the feed events
// describing the change, so a change and its event commit together or not at all.
import type { Transaction } from 'kysely';
import type { Clock } from '../../lib/clock.js';
import type { NewEvent } from '../../protocol/events.js';
import { appendEvents } from '../feed/event-log.js';
import type { Store } from './open.js';
import type { Tables } from './types.js';

export interface Tx {
  db: Transaction<Tables>;
  /** Milliseconds at the start of this write; use it for every timestamp of the change. */
  nowMs: number;
  now: string;
  /** Queues a feed event; it is appended at the end of the transaction. */
  emit(event: NewEvent): void;
}

export type Write = <T>(fn: (tx: Tx) => Promise<T>) => Promise<T>;

/** `onEvents` runs after a transaction that appended events has committed. */
export function createWrite(store: Store, clock: Clock, onEvents: () => void): Write {
  return async (fn) => {
    const events: NewEvent[] = [];
    const nowMs = clock.now();
    const result = await store.db.transaction().execute(async (trx) => {
      const r = await fn({
        db: trx,
        nowMs,
        now: new Date(nowMs).toISOString(),
        emit: (e) => events.push(e),
      });
      await appendEvents(trx, nowMs, events);
      return r;
    });
    if (events.length > 0) onEvents();
    return result;
  };
}
