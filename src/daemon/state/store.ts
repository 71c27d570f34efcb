// state.db: svcd's own SQLite file (WAL). Each component keeps its tables here and applies
// its migrations once, tracked per component in svc_state_migrations.
import { Kysely, SqliteDialect } from 'kysely';
import type { Clock } from '../../lib/clock.js';
import { iso } from '../../lib/clock.js';
import { openSqlite } from '../../lib/sqlite.js';
import type { StateMigration, StateStore } from '../context.js';

interface MigrationTable {
  svc_state_migrations: { component: string; version: number; name: string; applied_at: string };
}

export interface OpenStateStore extends StateStore {
  close(): Promise<void>;
}

export function openStateStore(file: string, clock: Clock): OpenStateStore {
  // FULL: a cron dedup key or outbox row written before an action must survive a crash.
  const sqlite = openSqlite(file, { synchronous: 'FULL' });
  const db = new Kysely<unknown>({ dialect: new SqliteDialect({ database: sqlite.kysely }) });
  const typed = db as unknown as Kysely<MigrationTable>;
  let ready: Promise<void> | null = null;
  const ensureTable = () => {
    ready ??= typed.schema
      .createTable('svc_state_migrations')
      .ifNotExists()
      .addColumn('component', 'text', (c) => c.notNull())
      .addColumn('version', 'integer', (c) => c.notNull())
      .addColumn('name', 'text', (c) => c.notNull())
      .addColumn('applied_at', 'text', (c) => c.notNull())
      .addPrimaryKeyConstraint('svc_state_migrations_pk', ['component', 'version'])
      .execute();
    return ready;
  };
  return {
    db,
    async migrate(component, migrations: StateMigration[]) {
      await ensureTable();
      const done = new Set(
        (
          await typed
            .selectFrom('svc_state_migrations')
            .select('version')
            .where('component', '=', component)
            .execute()
        ).map((r) => r.version),
      );
      for (const m of [...migrations].sort((a, b) => a.version - b.version)) {
        if (done.has(m.version)) continue;
        await typed.transaction().execute(async (trx) => {
          await m.up(trx as unknown as Kysely<unknown>);
          await trx
            .insertInto('svc_state_migrations')
            .values({ component, version: m.version, name: m.name, applied_at: iso(clock.now()) })
            .execute();
        });
      }
    },
    close: () => db.destroy(),
  };
}
