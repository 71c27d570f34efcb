// Queries of hot routes compiled to SQL once, not on every request: Kysely builds and
// compiles its operation tree on each call, which showed in profiles of GET routes. Outside a
// transaction on PostgreSQL the statement is also named, so each pooled connection parses and
// plans it once. The query is written with Kysely as usual, with named placeholders for its
// values; it must not depend on them otherwise (same SQL for every call).
import { createHash } from 'node:crypto';
import { type Compilable, CompiledQuery, type Kysely } from 'kysely';
import type { Store } from './open.js';
import type { Tables } from './types.js';

/** A placeholder for the value named `name` in a prepared query. */
export function slot(name: string): string {
  return `\u0000slot:${name}`;
}

export interface PreparedQuery<R> {
  /** Runs the query with `values` for its slots, on the store or inside a transaction. */
  all(db: Pick<Kysely<Tables>, 'executeQuery'>, values: Record<string, unknown>): Promise<R[]>;
}

export function prepare<R>(store: Store, build: () => Compilable): PreparedQuery<R> {
  let compiled: { sql: string; slots: string[]; name: string } | null = null;
  const compile = () => {
    if (compiled) return compiled;
    const q = build().compile();
    const slots = q.parameters.map((p) => {
      const m = typeof p === 'string' && p.startsWith('\u0000slot:') ? p.slice(6) : null;
      if (m === null) throw new Error(`prepared query has a value that is not a slot: ${String(p)}`);
      return m;
    });
    const name = `q_${createHash('sha1').update(q.sql).digest('hex').slice(0, 16)}`;
    compiled = { sql: q.sql, slots, name };
    return compiled;
  };
  return {
    async all(db, values) {
      const c = compile();
      const params = c.slots.map((s) => {
        if (!(s in values)) throw new Error(`prepared query needs a value for "${s}"`);
        return values[s];
      });
      if (store.pgPool && (db as unknown) === store.db) {
        return (await store.pgPool.query({ name: c.name, text: c.sql, values: params })).rows as R[];
      }
      return (await db.executeQuery<R>(CompiledQuery.raw(c.sql, params))).rows as R[];
    },
  };
}
