// better-sqlite3 with a prepared-statement cache, raw (svcd's state.db) or behind Kysely (the
// tower): Kysely's SQLite driver prepares every statement on every call, which dominated
// profiles of hot routes.
import Database from 'better-sqlite3';
import type { SqliteDatabase, SqliteStatement } from 'kysely';

export interface SqliteOptions {
  /** NORMAL for the tower (WAL makes it crash-safe for committed data up to the last
   * checkpoint); FULL where a write must survive power loss before an action follows. */
  synchronous: 'NORMAL' | 'FULL';
  foreignKeys?: boolean;
  /** A read-only connection to a database another connection of this process writes (WAL:
   * its reads see every committed write and never wait for the writer). */
  readonly?: boolean;
  /**
   * How long a statement waits for another connection's lock before SQLITE_BUSY (default
   * 5000). better-sqlite3 waits synchronously, blocking the event loop: a connection that
   * must not block sets 0 and waits between attempts itself (the tower's writer, store/tx.ts).
   */
  busyTimeoutMs?: number;
}

const CACHE_LIMIT = 500;

export function openSqlite(
  file: string,
  opts: SqliteOptions,
): { raw: Database.Database; prepare(sql: string): Database.Statement; kysely: SqliteDatabase } {
  const raw = new Database(file, { readonly: opts.readonly ?? false });
  if (!opts.readonly) {
    raw.pragma('journal_mode = WAL');
    raw.pragma(`synchronous = ${opts.synchronous}`);
  }
  raw.pragma(`busy_timeout = ${opts.busyTimeoutMs ?? 5000}`);
  if (opts.foreignKeys) raw.pragma('foreign_keys = ON');
  const cache = new Map<string, Database.Statement>();
  const prepare = (sql: string): Database.Statement => {
    let stmt = cache.get(sql);
    if (!stmt) {
      stmt = raw.prepare(sql);
      if (cache.size >= CACHE_LIMIT) cache.delete(cache.keys().next().value as string);
      cache.set(sql, stmt);
    }
    return stmt;
  };
  const kysely: SqliteDatabase = {
    close: () => raw.close(),
    prepare: (sql: string) => prepare(sql) as unknown as SqliteStatement,
  };
  return { raw, prepare, kysely };
}
