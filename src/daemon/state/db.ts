// state.db as svcd's components see it: plain SQL on better-sqlite3 (prepared statements,
// cached), synchronous, with transactions that commit when their function returns. Not
// Kysely: its ≈260 modules were ≈2.5 MiB of the idle daemon's heap (docs/perf-notes.md, daemon).
import type Database from 'better-sqlite3';

export type SqlValue = string | number | bigint | null;

export interface StateDb {
  /** A statement that returns no rows; how many rows it changed. */
  run(sql: string, params?: readonly SqlValue[]): number;
  all<T>(sql: string, params?: readonly SqlValue[]): T[];
  get<T>(sql: string, params?: readonly SqlValue[]): T | undefined;
  /** Statements without parameters, separated by ";" (migrations). */
  exec(sql: string): void;
  /** Runs fn in one transaction: committed when it returns, rolled back when it throws. */
  transaction<T>(fn: () => T): T;
}

export function stateDbOf(raw: Database.Database, prepare: (sql: string) => Database.Statement): StateDb {
  return {
    run: (sql, params = []) => prepare(sql).run(...params).changes,
    all: <T>(sql: string, params: readonly SqlValue[] = []) => prepare(sql).all(...params) as T[],
    get: <T>(sql: string, params: readonly SqlValue[] = []) => prepare(sql).get(...params) as T | undefined,
    exec: (sql) => {
      raw.exec(sql);
    },
    transaction: (fn) => raw.transaction(fn)(),
  };
}
