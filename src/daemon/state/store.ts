// state.db: svcd's own SQLite file (WAL). Each component keeps its tables here and applies
// its migrations once, tracked per component in svc_state_migrations.
import type { Clock } from '../../lib/clock.js';
import { iso } from '../../lib/clock.js';
import { ensurePrivateFile, refuseSharedFiles } from '../../lib/private-files.js';
import { openSqlite } from '../../lib/sqlite.js';
import type { StateDb } from './db.js';
import { stateDbOf } from './db.js';

export interface StateMigration {
  version: number;
  name: string;
  /** Runs inside the migration's transaction. */
  up(db: StateDb): void;
}

/** state.db: one SQLite file shared by components, each with its own tables. */
export interface StateStore {
  /** Plain SQL on the file; each component types its own rows. */
  db: StateDb;
  /** Applies a component's migrations once, tracked per component name. */
  migrate(component: string, migrations: StateMigration[]): Promise<void>;
}

export interface OpenStateStore extends StateStore {
  close(): Promise<void>;
}

export function openStateStore(file: string, clock: Clock): OpenStateStore {
  // state.db is private (0600, as its -wal and -shm, which SQLite makes with its mode); one
  // that other users can read is refused.
  refuseSharedFiles([file, `${file}-wal`, `${file}-shm`], "svcd's state database");
  ensurePrivateFile(file);
  // FULL: a cron dedup key or outbox row written before an action must survive a crash.
  const sqlite = openSqlite(file, { synchronous: 'FULL' });
  const db = stateDbOf(sqlite.raw, sqlite.prepare);
  let ready = false;
  const ensureTable = () => {
    if (ready) return;
    db.exec(
      'create table if not exists "svc_state_migrations" ("component" text not null, "version" integer not null, "name" text not null, "applied_at" text not null, constraint "svc_state_migrations_pk" primary key ("component", "version"))',
    );
    ready = true;
  };
  return {
    db,
    async migrate(component, migrations: StateMigration[]) {
      ensureTable();
      const done = new Set(
        db
          .all<{ version: number }>('select "version" from "svc_state_migrations" where "component" = ?', [
            component,
          ])
          .map((r) => r.version),
      );
      for (const m of [...migrations].sort((a, b) => a.version - b.version)) {
        if (done.has(m.version)) continue;
        db.transaction(() => {
          m.up(db);
          db.run(
            'insert into "svc_state_migrations" ("component", "version", "name", "applied_at") values (?, ?, ?, ?)',
            [component, m.version, m.name, iso(clock.now())],
          );
        });
      }
    },
    async close() {
      if (sqlite.raw.open) sqlite.raw.close();
    },
  };
}
