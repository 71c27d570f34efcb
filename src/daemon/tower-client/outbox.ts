// The durable event outbox: events are committed to state.db, then delivered to the tower
// in batches (POST /nodes/events) with backoff while it is unreachable. Each event has a
// unique key, so a batch retried after a lost reply is not doubled on the feed.
import { Backoff } from '../../lib/backoff.js';
import type { Clock, TimerHandle } from '../../lib/clock.js';
import { iso } from '../../lib/clock.js';
import { newId } from '../../lib/ids.js';
import type { Logger } from '../../lib/log.js';
import type { NewEvent } from '../../protocol/events.js';
import type { Component } from '../component.js';
import type { StateMigration, StateStore } from '../state/store.js';
import type { TowerApi } from './api.js';

/**
 * Events the daemon reports to the tower feed (watchdog restarts, cron fires, attach
 * sessions, progress). publish() resolves once the event is in the durable outbox in
 * state.db; delivery retries until the tower has it, so a tower outage loses none, and the
 * tower de-duplicates retries by the event's key.
 */
export interface EventOutbox {
  publish(event: NewEvent): Promise<void>;
}

interface OutboxTables {
  outbox: { seq: number | null; key: string; event: string; created_at: string };
}

const MIGRATIONS: StateMigration[] = [
  {
    version: 1,
    name: 'outbox',
    up(db) {
      db.exec(
        'create table "outbox" ("seq" integer primary key autoincrement, "key" text not null unique, "event" text not null, "created_at" text not null)',
      );
    },
  },
];

const BATCH = 500;
/** Beyond this many undelivered events the oldest are dropped (and the drop is logged). */
const MAX_PENDING = 100_000;

export interface Outbox extends EventOutbox, Component {
  /** Events not yet accepted by the tower. */
  pending(): Promise<number>;
  /** Delivers what is pending now; resolves when the outbox is empty or delivery failed. */
  flush(): Promise<boolean>;
}

export function createOutbox(deps: {
  state: StateStore;
  tower: TowerApi;
  clock: Clock;
  log: Logger;
}): Outbox {
  const db = deps.state.db;
  const log = deps.log.child({ component: 'outbox' });
  const backoff = new Backoff();
  let timer: TimerHandle | null = null;
  let running: Promise<boolean> | null = null;
  let stopped = false;
  let delivered = 0;
  /** Undelivered rows; counted at start, kept in memory so publish stays O(1). */
  let pendingCount = 0;
  /** Set by publish while a delivery runs, so the run loops once more instead of missing it. */
  let dirty = false;

  async function countRows(): Promise<number> {
    return Number(db.get<{ n: number }>('select count(*) as "n" from "outbox"')?.n ?? 0);
  }

  function schedule(ms: number) {
    if (stopped || timer) return;
    timer = deps.clock.setTimeout(() => {
      timer = null;
      void flush();
    }, ms);
  }

  async function deliverOnce(): Promise<'empty' | 'more' | 'failed'> {
    dirty = false;
    const rows = db.all<OutboxTables['outbox']>('select * from "outbox" order by "seq" limit ?', [BATCH]);
    if (rows.length === 0) return dirty ? 'more' : 'empty';
    const events = rows.map((r) => ({ key: r.key, ...(JSON.parse(r.event) as NewEvent) }));
    try {
      await deps.tower.request('POST', '/nodes/events', { events });
    } catch (e) {
      log.debug({ err: (e as Error).message, pending: rows.length }, 'event delivery failed; will retry');
      return 'failed';
    }
    const last = rows[rows.length - 1]?.seq ?? 0;
    db.run('delete from "outbox" where "seq" <= ?', [last]);
    delivered += rows.length;
    pendingCount = Math.max(0, pendingCount - rows.length);
    return rows.length === BATCH || dirty ? 'more' : 'empty';
  }

  function flush(): Promise<boolean> {
    running ??= (async () => {
      try {
        for (;;) {
          const r = await deliverOnce();
          if (r === 'empty') {
            backoff.reset();
            return true;
          }
          if (r === 'failed') {
            schedule(backoff.next());
            return false;
          }
        }
      } finally {
        running = null;
      }
    })();
    return running;
  }

  return {
    name: 'outbox',
    async start() {
      await deps.state.migrate('outbox', MIGRATIONS);
      pendingCount = await countRows();
      void flush();
    },
    async stop() {
      stopped = true;
      timer?.cancel();
      timer = null;
      await running;
    },
    async publish(event) {
      db.run('insert into "outbox" ("seq", "key", "event", "created_at") values (null, ?, ?, ?)', [
        newId('evt', deps.clock.now()),
        JSON.stringify(event),
        iso(deps.clock.now()),
      ]);
      pendingCount++;
      dirty = true;
      if (pendingCount > MAX_PENDING) {
        const excess = pendingCount - MAX_PENDING;
        log.warn(
          { dropped: excess },
          'event outbox full while the tower is unreachable; dropping the oldest events',
        );
        const cutoff = db.get<{ seq: number }>('select "seq" from "outbox" order by "seq" limit 1 offset ?', [
          excess - 1,
        ]);
        if (cutoff?.seq) db.run('delete from "outbox" where "seq" <= ?', [cutoff.seq]);
        pendingCount = await countRows();
      }
      if (!stopped && !timer) void flush();
    },
    pending: countRows,
    flush,
    status: () => ({ delivered }),
  };
}
