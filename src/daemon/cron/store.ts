// Cron's tables in state.db: dedup keys (job, scheduled minute), history (last 100 entries
// per job), heartbeat slots and the last ticked minute. One function per operation; the
// tick's admit() is the one transaction that makes a fire happen at most once.
import { iso } from '../../lib/clock.js';
import type { CronDispatch, CronFire, CronOutcome, CronSkipReason } from '../../protocol/cron.js';
import { CRON_HISTORY_MAX } from '../../protocol/cron.js';
import type { StateDb } from '../state/db.js';
import type { StateMigration } from '../state/store.js';

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

export type CronDb = StateDb;

export const CRON_MIGRATIONS: StateMigration[] = [
  {
    version: 1,
    name: 'cron tables',
    up(db) {
      db.exec(`
        create table "cron_dedup" ("job" text not null, "minute" integer not null, "created_at" integer not null,
          constraint "cron_dedup_pk" primary key ("job", "minute"));
        create index "cron_dedup_minute" on "cron_dedup" ("minute");
        create table "cron_history" ("id" integer primary key autoincrement, "job" text not null,
          "scheduled_minute" integer not null, "dispatch" text not null, "outcome" text not null, "reason" text,
          "catch_up" integer default 0 not null, "started_at" integer, "finished_at" integer, "duration_ms" integer,
          "exit_code" integer, "output_tail" text, "detail" text);
        create index "cron_history_job" on "cron_history" ("job", "id");
        create table "cron_heartbeat" ("job" text primary key, "last_slot" integer not null);
        create table "cron_meta" ("key" text primary key, "value" integer not null);`);
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
  return db.transaction(() => {
    const admitted: Admitted<E>[] = [];
    if (entries.length > 0) {
      const minutes = [...new Set(entries.map((e) => e.scheduledMinute))];
      const taken = new Set<string>();
      for (let i = 0; i < minutes.length; i += CHUNK) {
        const part = minutes.slice(i, i + CHUNK);
        for (const r of db.all<{ job: string; minute: number }>(
          `select "job", "minute" from "cron_dedup" where "minute" in (${part.map(() => '?').join(', ')})`,
          part,
        )) {
          taken.add(`${r.minute} ${r.job}`);
        }
      }
      const fresh: E[] = [];
      for (const e of entries) {
        const key = `${e.scheduledMinute} ${e.job}`;
        if (taken.has(key)) continue;
        taken.add(key);
        fresh.push(e);
      }
      for (let i = 0; i < fresh.length; i += CHUNK) {
        const part = fresh.slice(i, i + CHUNK);
        db.run(
          `insert into cron_dedup (job, minute, created_at) values ${rows(part.length, 3)}`,
          part.flatMap((e) => [e.job, e.scheduledMinute, now]),
        );
        const inserted = db.all<{ id: number; job: string; scheduled_minute: number }>(
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
        );
        // RETURNING's row order is unspecified in SQLite: match rows by their dedup key.
        const ids = new Map(inserted.map((r) => [`${r.scheduled_minute} ${r.job}`, Number(r.id)]));
        for (const entry of part) {
          admitted.push({ entry, id: ids.get(`${entry.scheduledMinute} ${entry.job}`) ?? 0 });
        }
      }
    }
    for (const [job, slot] of heartbeats) {
      db.run(
        'insert into "cron_heartbeat" ("job", "last_slot") values (?, ?) on conflict ("job") do update set "last_slot" = excluded."last_slot"',
        [job, slot],
      );
    }
    setMeta(db, 'last_tick', lastTick);
    return admitted;
  });
}

function setMeta(db: CronDb, key: string, value: number): void {
  db.run(
    'insert into "cron_meta" ("key", "value") values (?, ?) on conflict ("key") do update set "value" = excluded."value"',
    [key, value],
  );
}

export async function lastTick(db: CronDb): Promise<number | null> {
  const r = db.get<{ value: number }>('select "value" from "cron_meta" where "key" = ?', ['last_tick']);
  return r ? Number(r.value) : null;
}

export async function heartbeatSlotsOf(db: CronDb): Promise<Map<string, number>> {
  const rows = db.all<CronTables['cron_heartbeat']>('select * from "cron_heartbeat"');
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
  db.transaction(() => {
    for (const { finish: f } of done) {
      db.run(
        'update cron_history set outcome = ?, finished_at = ?, duration_ms = ?, exit_code = ?, output_tail = ?, detail = ? where id = ?',
        [f.outcome, f.finishedAt, f.durationMs, f.exitCode, f.outputTail, f.detail, f.id],
      );
    }
    for (const job of trimJobs) trimNow(db, job);
  });
}

/** Keeps the newest CRON_HISTORY_MAX entries of a job. */
export async function trim(db: CronDb, job: string): Promise<void> {
  trimNow(db, job);
}

function trimNow(db: CronDb, job: string): void {
  const cut = db.get<{ id: number }>(
    'select "id" from "cron_history" where "job" = ? order by "id" desc limit 1 offset ?',
    [job, CRON_HISTORY_MAX],
  );
  if (cut?.id != null) db.run('delete from "cron_history" where "job" = ? and "id" <= ?', [job, cut.id]);
}

/** Fires left `running` by a svcd that died: their outcome is unknown. Returns them. */
export async function interruptLeftovers(db: CronDb, now: number): Promise<CronFire[]> {
  const rows = db.all<HistoryRow>('select * from "cron_history" where "outcome" = ?', ['running']);
  if (rows.length === 0) return [];
  const detail = 'svcd exited while this fire was running; its outcome is unknown';
  db.run('update "cron_history" set "outcome" = ?, "finished_at" = ?, "detail" = ? where "outcome" = ?', [
    'interrupted',
    now,
    detail,
    'running',
  ]);
  return rows.map((r) => fireOf({ ...r, outcome: 'interrupted', finished_at: now, detail }));
}

export async function history(db: CronDb, job: string, limit: number): Promise<CronFire[]> {
  const rows = db.all<HistoryRow>('select * from "cron_history" where "job" = ? order by "id" desc limit ?', [
    job,
    limit,
  ]);
  return rows.map(fireOf);
}

/** The newest history entry of each job that has one. */
export async function lastFires(db: CronDb): Promise<Map<string, CronFire>> {
  const rows = db.all<HistoryRow>(
    'select "h".* from "cron_history" as "h" where "h"."id" in (select max("id") as "id" from "cron_history" group by "job")',
  );
  return new Map(rows.map((r) => [r.job, fireOf(r)]));
}

/** Drops dedup keys of minutes before `cutoff`; returns how many. */
export async function gc(db: CronDb, cutoff: number): Promise<number> {
  return db.run('delete from "cron_dedup" where "minute" < ?', [cutoff]);
}

export async function dedupCount(db: CronDb): Promise<number> {
  return Number(db.get<{ n: number }>('select count(*) as "n" from "cron_dedup"')?.n ?? 0);
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
