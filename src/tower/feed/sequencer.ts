// PostgreSQL only: numbers committed feed events. Writers insert events with id NULL (no
// lock, so they commit concurrently); one sequencer at a time per schema (advisory lock)
// gives every committed, unnumbered row the next ids in insertion order, commits, and
// notifies readers. Visibility order therefore equals id order, which is what makes
// "resume after id N" exact. Every replica runs one, kicked after its own commits; they
// take turns on the lock, and a short poll numbers rows a crashed replica left behind.
import pg from 'pg';
import type { Clock, TimerHandle } from '../../lib/clock.js';
import type { Logger } from '../../lib/log.js';
import type { Signal } from '../../lib/signal.js';
import type { Store } from '../store/open.js';
import { notifyChannel } from './event-log.js';

const SEQ_LOCK_NS = 0x5e5d;
const BATCH = 5000;
/** Backstop for rows left by a replica that died between commit and numbering. */
const POLL_MS = 1000;
/** Pause between back-to-back passes while writes keep arriving (real time, not the clock). */
const BUSY_GAP_MS = Number(process.env.SVC_SEQ_GAP_MS ?? 2);

export interface Sequencer {
  start(): Promise<void>;
  /** Asks for a sequencing pass soon (coalesced). */
  kick(): void;
  stop(): Promise<void>;
}

export function createSequencer(deps: {
  store: Store;
  clock: Clock;
  log: Logger;
  /** Emitted after this replica numbered events (local readers wake on it). */
  sequenced: Signal<void>;
}): Sequencer {
  const { store, clock } = deps;
  const log = deps.log.child({ component: 'sequencer' });
  let running: Promise<void> | null = null;
  let again = false;
  let stopped = false;
  let poll: TimerHandle | null = null;
  let client: pg.Client | null = null;
  const channel = notifyChannel(store.schema).replace(/'/g, "''");
  const passSql = `
    begin;
    set local enable_bitmapscan = off;
    select pg_advisory_xact_lock(${SEQ_LOCK_NS}, hashtext(current_schema()));
    with pending as (
      select pk, row_number() over (order by pk) as n
      from (select pk from events where id is null order by pk limit ${BATCH}) p
    ), base as (select coalesce(max(id), 0) as b from events),
    numbered as (
      update events set id = base.b + pending.n from pending, base where events.pk = pending.pk returning 1
    )
    select count(*)::int as n, case when count(*) > 0 then pg_notify('${channel}', '') end from numbered;
    commit;`;

  // Unnumbered rows are read in pk order through the partial index events_unsequenced. Each
  // pass's UPDATE leaves the rows' old (id NULL) versions behind in that index until vacuum;
  // an index scan marks their entries dead as it passes them (later passes skip them), a
  // bitmap scan never does and would visit every one of them again on every pass (measured:
  // ~10 000 entries and ~500 heap pages per pass midway through bench/queue, 3 ms instead of
  // 0.1 ms). The planner, seeing few unnumbered rows, prefers the bitmap scan: hence SET LOCAL.
  /**
   * One pass in one round trip on the sequencer's own connection (never waiting behind
   * HTTP requests for a pool slot). Statements of a simple query each take a fresh
   * snapshot, so max(id) is read after the lock is held.
   */
  async function pass(): Promise<number> {
    if (!client) {
      const c = new pg.Client(store.pgConfig ?? {});
      c.on('error', (e) => {
        log.warn({ err: e.message }, 'sequencer connection lost; reconnecting on the next pass');
        if (client === c) client = null;
      });
      await c.connect();
      client = c;
    }
    const results = (await client.query(passSql)) as unknown as pg.QueryResult<{ n: number }>[];
    return results[3]?.rows[0]?.n ?? 0;
  }

  function kick(): void {
    if (stopped) return;
    if (running) {
      again = true;
      return;
    }
    running = (async () => {
      try {
        do {
          again = false;
          let n: number;
          do {
            n = await pass();
            if (n > 0) deps.sequenced.emit();
          } while (n === BATCH && !stopped);
          // Busy: let rows gather for a moment, so one pass (one commit, one fsync) numbers
          // many. A lone write is numbered at once; under load this bounds passes per second.
          if (again && !stopped) await new Promise((r) => setTimeout(r, BUSY_GAP_MS));
        } while (again && !stopped);
      } catch (e) {
        if (!stopped) log.error({ err: e }, 'sequencing failed; retrying on the next wake-up');
      } finally {
        running = null;
      }
    })();
  }

  function schedulePoll(): void {
    poll = clock.setTimeout(() => {
      kick();
      if (!stopped) schedulePoll();
    }, POLL_MS);
  }

  return {
    async start() {
      if (store.dialect !== 'postgres') return;
      schedulePoll();
      kick();
    },
    kick,
    async stop() {
      stopped = true;
      poll?.cancel();
      await running;
      await client?.end().catch(() => {});
      client = null;
    },
  };
}
