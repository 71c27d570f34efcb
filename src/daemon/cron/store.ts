// Cron's tables in state.db: dedup keys (job, scheduled minute), history (last 100 entries
// per job), heartbeat slots and the last ticked minute. One function per operation; the
// tick's admit() is the one transaction that makes a fire happen at most once.
import { CompiledQuery, type Kysely, type Transaction } from 'kysely';
import { iso } from '../../lib/clock.js';
import type { CronDispatch, CronFire, CronOutcome, CronSkipReason } from '../../protocol/cron.js';
import { CRON_HISTORY_MAX } from '../../protocol/cron.js';
import type { StateMigration } from '../context.js';

export interface CronTables {
  cron_dedup: { job: string; minute: number; created_at: number };
  cron_history: {
    id: number | null;
    job: string;
    scheduled_minute: number;
    dispatch: string;
    outcome: string;
    reason: string | null;
    catch_up: number;
    started_at: number | null;
    finished_at: number | null;
    duration_ms: number | null;
    exit_code: number | null;
    output_tail: string | null;
    detail: string | null;
  };
  cron_heartbeat: { job: string; last_slot: number };
  cron_meta: { key: string; value: number };
}

export type CronDb = Kysely<CronTables>;

export const CRON_MIGRATIONS: StateMigration[] = [
  {
    version: 1,
    name: 'cron tables',
    async up(raw) {
      const db = raw as unknown as CronDb;
      await db.schema
        .createTable('cron_dedup')
        .addColumn('job', 'text', (c) => c.notNull())
        .addColumn('minute', 'integer', (c) => c.notNull())
        .addColumn('created_at', 'integer', (c) => c.notNull())
        .addPrimaryKeyConstraint('cron_dedup_pk', ['job', 'minute'])
        .execute();
      await db.schema.createIndex('cron_dedup_minute').on('cron_dedup').column('minute').execute();
      await db.schema
        .createTable('cron_history')
        .addColumn('id', 'integer', (c) => c.primaryKey().autoIncrement())
        .addColumn('job', 'text', (c) => c.notNull())
        .addColumn('scheduled_minute', 'integer', (c) => c.notNull())
        .addColumn('dispatch', 'text', (c) => c.notNull())
        .addColumn('outcome', 'text', (c) => c.notNull())
        .addColumn('reason', 'text')
        .addColumn('catch_up', 'integer', (c) => c.notNull().defaultTo(0))
        .addColumn('started_at', 'integer')
        .addColumn('finished_at', 'integer')
        .addColumn('duration_ms', 'integer')
        .addColumn('exit_code', 'integer')
        .addColumn('output_tail', 'text')
        .addColumn('detail', 'text')
        .execute();
      await db.schema.createIndex('cron_history_job').on('cron_history').columns(['job', 'id']).execute();
      await db.schema
        .createTable('cron_heartbeat')
        .addColumn('job', 'text', (c) => c.primaryKey())
        .addColumn('last_slot', 'integer', (c) => c.notNull())
        .execute();
      await db.schema
        .createTable('cron_meta')
        .addColumn('key', 'text', (c) => c.primaryKey())
        .addColumn('value', 'integer', (c) => c.notNull())
        .execute();
    },
  },
];

/** A history row the tick writes with its dedup key. */
export interface NewEntry {
  job: string;
  scheduledMinute: number;
  dispatch: CronDispatch;
  outcome: 'running' | 'skipped';
  reason: CronSkipReason | null;
  catchUp: boolean;
  startedAt: number | null;
  detail: string | null;
}

export interface Admitted<E extends NewEntry> {
  entry: E;
  id: number;
}

/** SQLite's default limit on bound variables is 32 766; 9 columns × 500 rows stays well below. */
const CHUNK = 500;

const placeholders = new Map<string, string>();

/** "(?, ?, ?), (?, ?, ?)" for n rows of k columns, built once per shape. */
function rows(n: number, k: number): string {
  const key = `${n}x${k}`;
  let text = placeholders.get(key);
  if (!text) {
    const row = `(${Array.from({ length: k }, () => '?').join(', ')})`;
    text = Array.from({ length: n }, () => row).join(', ');
    placeholders.set(key, text);
  }
  return text;
}

/**
 * In one transaction: claims the dedup key of each entry (entries whose key exists are
 * dropped: they were handled before a restart), writes history rows for the claimed ones,
 * moves heartbeat slots and records the last ticked minute. Returns the claimed entries with their
 * history ids; the caller dispatches only those, after this commits.
 */
export async function admit<E extends NewEntry>(
  db: CronDb,
  lastTick: number,
  entries: readonly E[],
  heartbeats: ReadonlyMap<string, number>,
  now: number,
): Promise<Admitted<E>[]> {
  return db.transaction().execute(async (trx) => {
    const admitted: Admitted<E>[] = [];
    if (entries.length > 0) {
      const minutes = [...new Set(entries.map((e) => e.scheduledMinute))];
      const taken = new Set(
        (
          await trx
            .selectFrom('cron_dedup')
            .select(['job', 'minute'])
            .where('minute', 'in', minutes)
            .execute()
        ).map((r) => `${r.minute} ${r.job}`),
      );
      const fresh: E[] = [];
      for (const e of entries) {
        const key = `${e.scheduledMinute} ${e.job}`;
        if (taken.has(key)) continue;
        taken.add(key);
        fresh.push(e);
      }
      for (let i = 0; i < fresh.length; i += CHUNK) {
        const part = fresh.slice(i, i + CHUNK);
        // Plain SQL rather than the query builder: with 1 000 jobs due in a minute, building
        // and compiling these inserts was most of the tick's time before dispatch.
        await trx.executeQuery(
          CompiledQuery.raw(
            `insert into cron_dedup (job, minute, created_at) values ${rows(part.length, 3)}`,
            part.flatMap((e) => [e.job, e.scheduledMinute, now]),
          ),
        );
        const inserted = await trx.executeQuery<{ id: number; job: string; scheduled_minute: number }>(
          CompiledQuery.raw(
            `insert into cron_history (job, scheduled_minute, dispatch, outcome, reason, catch_up, started_at, finished_at, detail) values ${rows(part.length, 9)} returning id, job, scheduled_minute`,
            part.flatMap((e) => [
              e.job,
              e.scheduledMinute,
              e.dispatch,
              e.outcome,
              e.reason,
              e.catchUp ? 1 : 0,
              e.startedAt,
              e.outcome === 'skipped' ? now : null,
              e.detail,
            ]),
          ),
        );
        // RETURNING's row order is unspecified in SQLite: match rows by their dedup key.
        const ids = new Map(inserted.rows.map((r) => [`${r.scheduled_minute} ${r.job}`, Number(r.id)]));
        for (const entry of part) {
          admitted.push({ entry, id: ids.get(`${entry.scheduledMinute} ${entry.job}`) ?? 0 });
        }
      }
    }
    for (const [job, slot] of heartbeats) {
      await trx
        .insertInto('cron_heartbeat')
        .values({ job, last_slot: slot })
        .onConflict((oc) => oc.column('job').doUpdateSet({ last_slot: slot }))
        .execute();
    }
    await setMeta(trx, 'last_tick', lastTick);
    return admitted;
  });
}

async function setMeta(trx: Transaction<CronTables> | CronDb, key: string, value: number) {
  await trx
    .insertInto('cron_meta')
    .values({ key, value })
    .onConflict((oc) => oc.column('key').doUpdateSet({ value }))
    .execute();
}

export async function lastTick(db: CronDb): Promise<number | null> {
  const r = await db
    .selectFrom('cron_meta')
    .select('value')
    .where('key', '=', 'last_tick')
    .executeTakeFirst();
  return r ? Number(r.value) : null;
}

export async function heartbeatSlotsOf(db: CronDb): Promise<Map<string, number>> {
  const rows = await db.selectFrom('cron_heartbeat').selectAll().execute();
  return new Map(rows.map((r) => [r.job, Number(r.last_slot)]));
}

export interface Finish {
  id: number;
  outcome: Exclude<CronOutcome, 'running' | 'skipped'>;
  finishedAt: number;
  durationMs: number;
  exitCode: number | null;
  outputTail: string | null;
  detail: string | null;
}

/** Records the outcomes of finished fires and trims the given jobs' history, in one transaction. */
export async function finish(
  db: CronDb,
  done: readonly { job: string; finish: Finish }[],
  trimJobs: Iterable<string>,
): Promise<void> {
  if (done.length === 0) return;
  await db.transaction().execute(async (trx) => {
    for (const { finish: f } of done) {
      await trx.executeQuery(
        CompiledQuery.raw(
          'update cron_history set outcome = ?, finished_at = ?, duration_ms = ?, exit_code = ?, output_tail = ?, detail = ? where id = ?',
          [f.outcome, f.finishedAt, f.durationMs, f.exitCode, f.outputTail, f.detail, f.id],
        ),
      );
    }
    for (const job of trimJobs) await trim(trx, job);
  });
}

/** Keeps the newest CRON_HISTORY_MAX entries of a job. */
export async function trim(db: Transaction<CronTables> | CronDb, job: string): Promise<void> {
  const cut = await db
    .selectFrom('cron_history')
    .select('id')
    .where('job', '=', job)
    .orderBy('id', 'desc')
    .offset(CRON_HISTORY_MAX)
    .limit(1)
    .executeTakeFirst();
  if (cut?.id != null) {
    await db.deleteFrom('cron_history').where('job', '=', job).where('id', '<=', cut.id).execute();
  }
}

/** Fires left `running` by a svcd that died: their outcome is unknown. Returns them. */
export async function interruptLeftovers(db: CronDb, now: number): Promise<CronFire[]> {
  const rows = await db.selectFrom('cron_history').selectAll().where('outcome', '=', 'running').execute();
  if (rows.length === 0) return [];
  const detail = 'svcd exited while this fire was running; its outcome is unknown';
  await db
    .updateTable('cron_history')
    .set({ outcome: 'interrupted', finished_at: now, detail })
    .where('outcome', '=', 'running')
    .execute();
  return rows.map((r) => fireOf({ ...r, outcome: 'interrupted', finished_at: now, detail }));
}

export async function history(db: CronDb, job: string, limit: number): Promise<CronFire[]> {
  const rows = await db
    .selectFrom('cron_history')
    .selectAll()
    .where('job', '=', job)
    .orderBy('id', 'desc')
    .limit(limit)
    .execute();
  return rows.map(fireOf);
}

/** The newest history entry of each job that has one. */
export async function lastFires(db: CronDb): Promise<Map<string, CronFire>> {
  const rows = await db
    .selectFrom('cron_history as h')
    .selectAll('h')
    .where('h.id', 'in', (eb) =>
      eb
        .selectFrom('cron_history')
        .select((e) => e.fn.max('id').as('id'))
        .groupBy('job'),
    )
    .execute();
  return new Map(rows.map((r) => [r.job, fireOf(r)]));
}

/** Drops dedup keys of minutes before `cutoff`; returns how many. */
export async function gc(db: CronDb, cutoff: number): Promise<number> {
  const r = await db.deleteFrom('cron_dedup').where('minute', '<', cutoff).executeTakeFirst();
  return Number(r.numDeletedRows);
}

export async function dedupCount(db: CronDb): Promise<number> {
  const r = await db
    .selectFrom('cron_dedup')
    .select((eb) => eb.fn.countAll<number>().as('n'))
    .executeTakeFirstOrThrow();
  return Number(r.n);
}

type HistoryRow = CronTables['cron_history'];

export function fireOf(r: HistoryRow): CronFire {
  const t = (v: number | null) => (v === null ? null : iso(Number(v)));
  return {
    id: Number(r.id),
    job: r.job,
    scheduled_minute: iso(Number(r.scheduled_minute)),
    dispatch: r.dispatch as CronDispatch,
    outcome: r.outcome as CronOutcome,
    reason: (r.reason as CronSkipReason | null) ?? null,
    catch_up: Number(r.catch_up) === 1,
    started_at: t(r.started_at),
    finished_at: t(r.finished_at),
    duration_ms: r.duration_ms === null ? null : Number(r.duration_ms),
    exit_code: r.exit_code === null ? null : Number(r.exit_code),
    output_tail: r.output_tail,
    detail: r.detail,
  };
}
