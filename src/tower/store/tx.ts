// The tower's one way to change state: a transaction that also appends the feed events
// describing the change, so a change and its event commit together or not at all.
//
// SQLite has one connection and one writer, and a commit (a WAL append) costs more than the
// inserts of a typical request. So writes that arrive while a commit is under way are grouped:
// each runs in its own savepoint inside one shared transaction (a failing write rolls back
// only its savepoint and gets its error), the transaction commits once, and then every
// write of the group resolves. No caller sees success before its change is committed.
// PostgreSQL runs each write in its own transaction: concurrent commits already share
// fsyncs there, and a pooled connection per write keeps writers independent.
//
// Store faults (store/faults.ts) reach the caller as the driver raised them, never masked by
// a failed rollback, and each write's outcome is reported to the store's health (/readyz).
import { createHash } from 'node:crypto';
import { type Kysely, sql, type Transaction } from 'kysely';
import type pg from 'pg';
import { type Clock, iso } from '../../lib/clock.js';
import type { NewEvent } from '../../protocol/events.js';
import { storeFault } from './faults.js';
import type { StoreHealth } from './health.js';
import type { Store } from './open.js';
import { transaction } from './transaction.js';
import type { Tables } from './types.js';

export interface Tx {
  db: Transaction<Tables>;
  /** Milliseconds at the start of this write; use it for every timestamp of the change. */
  nowMs: number;
  now: string;
  /** Queues a feed event; it is appended at the end of the transaction. */
  emit(event: NewEvent): void;
}

export interface Write {
  <T>(fn: (tx: Tx) => Promise<T>): Promise<T>;
  /**
   * Inserts one row and its feed event, the row only if its parent (`gate`) exists. On
   * PostgreSQL this is a single statement (one round trip, no BEGIN/COMMIT); the hot path of
   * record creation. Returns false when the parent does not exist (nothing written).
   */
  insertOne(req: InsertOne): Promise<boolean>;
  /**
   * PostgreSQL only: runs one named statement in its own implicit transaction (one round
   * trip, no BEGIN/COMMIT) and returns its rows. The statement appends its own events
   * (readable once below the sequencer's watermark); `appended(rows)` says whether it did,
   * so the sequencer is woken only then. Hot paths (mesh claim and complete) use it.
   */
  statement<R>(query: PgStatement, appended: (rows: R[]) => boolean): Promise<R[]>;
}

export interface PgStatement {
  /** Prepared-statement name: parsed and planned once per pooled connection. */
  name: string;
  text: string;
  values: unknown[];
  /** Rows as arrays of column values in the statement's order (no object per row). */
  rowMode?: 'array';
}

export interface InsertOne {
  table: string;
  /** The column whose value must name an existing row of `table`, optionally also matching
   * `where` (for example a mission's id that must belong to the path's domain). It must be
   * NOT NULL in `table`. */
  gate?: { column: string; table: string; where?: Record<string, string> };
  /** The row and its event, stamped with the write's time. */
  build(nowMs: number): { row: Record<string, unknown>; event: NewEvent };
}

/** Upper bound on writes sharing one SQLite commit (bounds the latency of the first). */
export const MAX_GROUP = 256;

export interface WriteOptions {
  /** Told of every write's outcome: a store fault, or a commit. */
  health?: StoreHealth;
  /**
   * SQLite: how long a write waits for another process's write lock before it fails with
   * SQLITE_BUSY (storage_busy). Waited without blocking the event loop.
   */
  busyTimeoutMs?: number;
}

export const DEFAULT_BUSY_TIMEOUT_MS = 5000;

/**
 * Where the events of writes go, handed in by the composition root (the store knows no area):
 * `append` inserts them at the end of their transaction, `committed` runs after a transaction
 * that appended events has committed.
 */
export interface EventSink {
  append(trx: Transaction<Tables>, nowMs: number, events: NewEvent[]): Promise<void>;
  committed(): void;
}

export function createWrite(store: Store, clock: Clock, sink: EventSink, opts: WriteOptions = {}): Write {
  const onEvents = () => sink.committed();
  const health = opts.health;
  /** Reports the outcome of `p` to the store's health. */
  const watched = <T>(p: Promise<T>): Promise<T> =>
    health
      ? p.then(
          (v) => {
            health.succeeded();
            return v;
          },
          (e: unknown) => {
            const f = storeFault(e);
            if (f) health.failed(f);
            throw e;
          },
        )
      : p;
  if (store.dialect === 'sqlite') {
    const group = createGroupWrite(store, clock, sink, opts.busyTimeoutMs ?? DEFAULT_BUSY_TIMEOUT_MS);
    const write = <T>(fn: (tx: Tx) => Promise<T>) => watched(group(fn));
    return Object.assign(write, {
      insertOne: (req: InsertOne) => insertOneInTx(write, req),
      statement: () => Promise.reject(new Error('Write.statement is PostgreSQL only')),
    });
  }
  const write = async <T>(fn: (tx: Tx) => Promise<T>): Promise<T> => {
    const events: NewEvent[] = [];
    const nowMs = clock.now();
    const result = await watched(
      transaction(store.db, async (trx) => {
        const r = await fn(txOf(trx, nowMs, events));
        await sink.append(trx, nowMs, events);
        return r;
      }),
    );
    if (events.length > 0) onEvents();
    return result;
  };
  const names = new Map<string, string>();
  const insertOne = async (req: InsertOne): Promise<boolean> => {
    const nowMs = clock.now();
    const { row, event: e } = req.build(nowMs);
    const cols = Object.keys(row);
    const params: unknown[] = [];
    const p = (v: unknown) => {
      params.push(v);
      return `$${params.length}`;
    };
    const values = cols.map((c) => {
      const v = p(row[c]);
      if (req.gate?.column !== c) return v;
      const conds = Object.entries(req.gate.where ?? {}).map(([k, w]) => ` and ${ident(k)} = ${p(w)}`);
      return `(select id from ${ident(req.gate.table)} where id = ${v}${conds.join('')})`;
    });
    const eventValues = [iso(nowMs), e.type, e.domain_id ?? null, e.mission_id ?? null, e.agent_id ?? null]
      .concat([e.status ?? null, JSON.stringify(e.payload)])
      .map(p);
    const text = `with r as (insert into ${ident(req.table)} (${cols.map(ident).join(', ')})
      values (${values.join(', ')}) returning 1)
      insert into events (ts, type, domain_id, mission_id, agent_id, status, payload)
      select ${eventValues.join(', ')} from r`;
    // A named statement is parsed and planned once per connection; the name is its text's.
    let name = names.get(text);
    if (!name) {
      name = `ins1_${createHash('sha1').update(text).digest('hex').slice(0, 16)}`;
      names.set(text, name);
    }
    try {
      await watched((store.pgHotPool as pg.Pool).query({ name, text, values: params }));
    } catch (err) {
      // The gate's subquery found nothing: its NOT NULL column refused the NULL.
      const pgErr = err as { code?: string; column?: string };
      if (req.gate && pgErr.code === '23502' && pgErr.column === req.gate.column) return false;
      throw err;
    }
    onEvents();
    return true;
  };
  const statement = async <R>(q: PgStatement, appended: (rows: R[]) => boolean): Promise<R[]> => {
    const res = await watched((store.pgHotPool as pg.Pool).query(q));
    const rows = res.rows as R[];
    if (appended(rows)) onEvents();
    return rows;
  };
  return Object.assign(write, { insertOne, statement });
}

/** insertOne as an ordinary write: check the gate, insert, emit. */
async function insertOneInTx(write: WriteFn, req: InsertOne): Promise<boolean> {
  return write(async (tx) => {
    const db = tx.db as unknown as Kysely<Record<string, Record<string, unknown>>>;
    const { row, event } = req.build(tx.nowMs);
    if (req.gate) {
      let q = db
        .selectFrom(req.gate.table)
        .select('id')
        .where('id', '=', row[req.gate.column] as string);
      for (const [k, w] of Object.entries(req.gate.where ?? {})) q = q.where(k, '=', w);
      if (!(await q.executeTakeFirst())) return false;
    }
    await db.insertInto(req.table).values(row).execute();
    tx.emit(event);
    return true;
  });
}

/** Table and column names come from code, never from requests; quoted all the same. */
function ident(name: string): string {
  return `"${name.replace(/"/g, '""')}"`;
}

type WriteFn = <T>(fn: (tx: Tx) => Promise<T>) => Promise<T>;

function txOf(trx: Transaction<Tables>, nowMs: number, events: NewEvent[]): Tx {
  return { db: trx, nowMs, now: new Date(nowMs).toISOString(), emit: (e) => events.push(e) };
}

interface Job {
  fn: (tx: Tx) => Promise<unknown>;
  resolve(v: unknown): void;
  reject(e: unknown): void;
}

function createGroupWrite(store: Store, clock: Clock, sink: EventSink, busyTimeoutMs: number): WriteFn {
  const queue: Job[] = [];
  let draining = false;

  /**
   * One group on the one connection, held throughout (reads of other requests wait, as they
   * would behind any transaction). BEGIN IMMEDIATE takes the write lock before any write of
   * the group runs, so a lock held by another process shows here and nowhere later: then
   * 'busy', and nothing ran.
   */
  async function group(conn: Kysely<Tables>): Promise<'busy' | 'done'> {
    try {
      await sql`begin immediate`.execute(conn);
    } catch (e) {
      if (storeFault(e)?.kind === 'busy') {
        lastBusy = e;
        return 'busy';
      }
      for (const job of queue.splice(0)) job.reject(e);
      return 'done';
    }
    const trx = conn as Transaction<Tables>;
    const done: { job: Job; result: unknown }[] = [];
    let anyEvents = false;
    try {
      let yielded = false;
      while (done.length < MAX_GROUP) {
        if (queue.length === 0) {
          if (yielded) break;
          yielded = true;
          await new Promise<void>((r) => setImmediate(r));
          continue;
        }
        const job = queue.shift() as Job;
        const events: NewEvent[] = [];
        const nowMs = clock.now();
        await sql`savepoint w`.execute(trx);
        let result: unknown;
        try {
          result = await job.fn(txOf(trx, nowMs, events));
          await sink.append(trx, nowMs, events);
        } catch (e) {
          job.reject(e);
          // Undo this write only. If even that fails, SQLite ended the transaction itself
          // (SQLITE_FULL, an I/O error): the group fails with this write's error, which
          // names the cause, not with the rollback's.
          try {
            await sql`rollback to w`.execute(trx);
            await sql`release w`.execute(trx);
          } catch {
            throw e;
          }
          continue;
        }
        await sql`release w`.execute(trx);
        if (events.length > 0) anyEvents = true;
        done.push({ job, result });
      }
      await sql`commit`.execute(trx);
    } catch (e) {
      // SQLite may have rolled the transaction back already; the error to report is e.
      await sql`rollback`.execute(trx).catch(() => {});
      for (const d of done) d.job.reject(e);
      return 'done';
    }
    for (const d of done) d.job.resolve(d.result);
    if (anyEvents) sink.committed();
    return 'done';
  }

  let lastBusy: unknown = null;

  /**
   * Runs a group, waiting for another process's write lock up to the busy timeout. The
   * writer connection has no busy handler (better-sqlite3 would block the event loop while
   * it waits): this waits between attempts instead, with the connection free for reads.
   */
  async function runGroup(): Promise<void> {
    const giveUpAt = clock.now() + busyTimeoutMs;
    let gap = 5;
    while ((await store.db.connection().execute(group)) === 'busy') {
      if (clock.now() >= giveUpAt) {
        // Nothing of theirs ran: every waiting write gets the lock's error.
        for (const job of queue.splice(0)) job.reject(lastBusy);
        return;
      }
      await clock.sleep(Math.max(1, Math.min(gap, giveUpAt - clock.now())));
      gap = Math.min(gap * 2, 100);
    }
  }

  async function drain(): Promise<void> {
    draining = true;
    try {
      while (queue.length > 0) await runGroup();
    } catch (e) {
      // No connection to be had (the store closed under a late write, the driver gone):
      // none of the waiting writes ran, and each gets the error rather than waiting forever.
      for (const job of queue.splice(0)) job.reject(e);
    } finally {
      draining = false;
    }
  }

  return <T>(fn: (tx: Tx) => Promise<T>) =>
    new Promise<T>((resolve, reject) => {
      queue.push({ fn, resolve: resolve as (v: unknown) => void, reject });
      if (!draining) void drain();
    });
}
