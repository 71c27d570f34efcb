// PostgreSQL only: advances the watermark below which feed events are readable.
//
// Writers give each event its id at insert (nextval of events_id_seq, feed/migrations.ts
// version 11) and commit concurrently, so ids are in insertion order and a transaction may
// commit after one holding a larger id. Readers read `feed_events`: ids up to the watermark
// W (table event_watermark), chosen so that every id <= W belongs to a transaction that has
// committed or rolled back. Reading `id > N and id <= W` therefore gives every event after N
// exactly once, in id order, however commits interleave: "resume after id N" stays exact.
//
// How W is found, without blocking writers: a pass reads the sequence's last value L, then
// the transactions holding ROW EXCLUSIVE on events (pg_locks). An id <= L was handed out
// inside an INSERT into events, which holds that lock from before nextval until its
// transaction ends; so each such transaction had ended when L was read, or is in that set.
// Once none of the set holds the lock any more (a later pass sees none of them), W = L.
// With no writer in flight that is the same pass. The candidates (L, set) wait in memory
// and each later pass settles the newest one it can. Aborted inserts leave holes in the
// ids; ids are strictly increasing, not dense.
//
// Every replica runs one, kicked after its own commits; publishing W is monotone
// (`where w < W`), so replicas need no turn-taking. A replica that publishes notifies the
// others' readers; a short poll covers events of a replica that died before its pass.
// A transaction holds W back from its event insert to its end: writers insert their events
// last, just before COMMIT (store/tx.ts, mesh/postgres/).
import type pg from 'pg';
import type { Clock, TimerHandle } from '../../lib/clock.js';
import type { Logger } from '../../lib/log.js';
import type { Signal } from '../../lib/signal.js';
import type { Store } from '../store/open.js';
import { connectClient, connectionLost, destroyClient } from '../store/pg-connection.js';
import { notifyChannel } from './event-log.js';

/** Backstop for events of a replica that died between commit and its pass. */
const POLL_MS = 1000;
/** Pause between passes while a candidate waits or writes keep arriving (real time). */
export const DEFAULT_BUSY_GAP_MS = 2;
/** Longest pause between passes while a candidate waits for a writer. */
const MAX_GAP_MS = 50;
/** Candidates waiting at once (each later one is a newer watermark). */
const MAX_CANDIDATES = 8;

export interface Sequencer {
  start(): Promise<void>;
  /** Asks for a pass soon (coalesced). */
  kick(): void;
  stop(): Promise<void>;
}

/** A watermark that becomes true once none of `holders` holds its lock any more. */
interface Candidate {
  last: bigint;
  holders: string[];
}

export function createSequencer(deps: {
  store: Store;
  clock: Clock;
  log: Logger;
  /** Emitted after this replica advanced the watermark (local readers wake on it). */
  sequenced: Signal<void>;
  /** Pause between passes while busy, ms (default DEFAULT_BUSY_GAP_MS; SVC_SEQ_GAP_MS at the CLI). */
  busyGapMs?: number;
}): Sequencer {
  const busyGapMs = deps.busyGapMs ?? DEFAULT_BUSY_GAP_MS;
  const { store, clock } = deps;
  const log = deps.log.child({ component: 'sequencer' });
  let running: Promise<void> | null = null;
  let again = false;
  let stopped = false;
  let failing = false;
  let poll: TimerHandle | null = null;
  let client: pg.Client | null = null;
  let candidates: Candidate[] = [];
  /** Highest W this replica published or read back. */
  let published = -1n;
  const channel = notifyChannel(store.schema).replace(/'/g, "''");
  // Two statements of one simple query run in order: the holders are read after L.
  const observeSql = `
    select last_value::text as last, is_called from events_id_seq;
    select coalesce(array_agg(pid || ':' || virtualtransaction), '{}') as holders from pg_locks
      where locktype = 'relation' and relation = 'events'::regclass and mode = 'RowExclusiveLock'
        and database = (select oid from pg_database where datname = current_database())
        and pid <> pg_backend_pid();`;
  const publishSql = `with u as (update event_watermark set w = $1::bigint where w < $1::bigint returning 1)
    select count(*)::int as n, case when count(*) > 0 then pg_notify('${channel}', '') end from u`;

  /** The sequencer's own connection (its statements have the store's timeouts). */
  async function connection(): Promise<pg.Client> {
    if (client) return client;
    let c: pg.Client | null = null;
    c = await connectClient(store.pgConfig ?? {}, (e) => {
      if (c && client === c) drop(c, e);
    });
    client = c;
    return c;
  }

  /** Forgets a broken connection; the next pass makes a new one. */
  function drop(c: pg.Client, e: unknown): void {
    if (client !== c) return;
    client = null;
    destroyClient(c);
    if (!stopped)
      log.warn({ err: (e as Error).message }, 'sequencer connection lost; reconnecting on the next pass');
  }

  /**
   * One pass on the sequencer's own connection (never waiting behind HTTP requests for a
   * pool slot). `waiting`: candidates still wait; `settled`: one settled.
   */
  async function pass(): Promise<{ waiting: boolean; settled: boolean }> {
    const c = await connection();
    const [seq, locks] = (await c.query(observeSql)) as unknown as [
      pg.QueryResult<{ last: string; is_called: boolean }>,
      pg.QueryResult<{ holders: string[] }>,
    ];
    const s = seq.rows[0] as { last: string; is_called: boolean };
    const last = s.is_called ? BigInt(s.last) : BigInt(s.last) - 1n;
    const holders = new Set(locks.rows[0]?.holders ?? []);
    // A writer that never ends holds every candidate back; their number stays bounded.
    if (candidates.length < MAX_CANDIDATES) candidates.push({ last, holders: [...holders] });
    let settled = -1;
    candidates.forEach((cand, i) => {
      if (cand.holders.every((h) => !holders.has(h))) settled = i;
    });
    if (settled >= 0) {
      const w = (candidates[settled] as Candidate).last;
      candidates = candidates.slice(settled + 1);
      if (w > published) {
        // No row updated: another replica published W or more already and told the readers.
        await c.query(publishSql, [String(w)]);
        published = w;
        deps.sequenced.emit();
      }
    }
    return { waiting: candidates.length > 0, settled: settled >= 0 };
  }

  function kick(): void {
    if (stopped) return;
    if (running) {
      again = true;
      return;
    }
    running = (async () => {
      try {
        let waiting = false;
        let gap = busyGapMs;
        do {
          again = false;
          const r = await pass();
          waiting = r.waiting;
          // Busy: let writes gather for a moment, so one pass (one commit, one fsync)
          // publishes many. A lone write is published at once. While a writer stays in
          // flight, passes back off.
          gap = r.settled ? busyGapMs : Math.min(gap * 2, MAX_GAP_MS);
          if ((again || waiting) && !stopped) await new Promise((r) => setTimeout(r, gap));
        } while ((again || waiting) && !stopped);
        if (failing) {
          failing = false;
          log.info('advancing the feed watermark works again');
        }
      } catch (e) {
        if (client && connectionLost(e)) drop(client, e);
        // Once per outage, not once per poll.
        if (!stopped && !failing) {
          failing = true;
          log.error({ err: e }, 'advancing the feed watermark failed; retrying on every wake-up');
        }
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
      const c = client;
      client = null;
      await c?.end().catch(() => {});
    },
  };
}
