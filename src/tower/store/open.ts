// Opens the tower's store: embedded SQLite (WAL) by default, PostgreSQL for replicas.
// `postgres://…?schema=NAME` keeps all tables in one schema (created if missing), which is
// how tests and shared servers isolate one tower from another.
import { join } from 'node:path';
import { Kysely, PostgresDialect, SqliteDialect, sql } from 'kysely';
import pg from 'pg';
import type { Clock } from '../../lib/clock.js';
import { iso } from '../../lib/clock.js';
import { ensurePrivateDir, ensurePrivateFile, refuseSharedFiles } from '../../lib/private-files.js';
import { openSqlite } from '../../lib/sqlite.js';
import type { Migration } from './migrations.js';
import {
  connectClient,
  createPool,
  DEFAULT_STORE_TIMEOUTS,
  kyselyPool,
  type StoreTimeouts,
  timedConfig,
} from './pg-connection.js';
import { transaction } from './transaction.js';
import type { Db, Dialect, Tables } from './types.js';

export interface Store {
  db: Db;
  /**
   * For reads that must not queue behind writes (the feed hub's reads of the log). On SQLite
   * a second, read-only connection: `db` is one connection that a write group holds across
   * event-loop turns (store/tx.ts), while a WAL reader sees every committed write and never
   * waits for the writer. On PostgreSQL the same pool as `db`.
   */
  reader: Db;
  dialect: Dialect;
  /** PostgreSQL schema in use (search_path), or null on SQLite. */
  schema: string | null;
  /**
   * Connection settings for a dedicated PostgreSQL client (LISTEN, the sequencer), with the
   * store's timeouts, or null on SQLite.
   */
  pgConfig: pg.ClientConfig | null;
  /** As pgConfig without a statement timeout: migrations (long DDL, waiting for the lock). */
  pgMaintenanceConfig: pg.ClientConfig | null;
  /** The PostgreSQL pool behind `db` (prepared.ts names its hot reads on it). */
  pgPool: pg.Pool | null;
  /**
   * PostgreSQL: the pool for the queue's one-statement transitions (Write.statement,
   * insertOne), whose sessions plan every prepared statement generically (see HOT_POOL_MAX).
   */
  pgHotPool: pg.Pool | null;
  /** Human description without credentials, for logs and doctor. */
  describe: string;
  close(): Promise<void>;
}

export interface OpenStoreOptions {
  /** postgres:// URL, or undefined for SQLite in dataDir. */
  database?: string;
  dataDir: string;
  poolSize?: number;
  /** PostgreSQL connect and statement timeouts (default DEFAULT_STORE_TIMEOUTS). */
  timeouts?: StoreTimeouts;
  /** A PostgreSQL connection of a pool broke (it is replaced on next use); for the log. */
  onConnectionError?: (err: Error) => void;
}

/**
 * Connections of the PostgreSQL pool for the queue's one-statement transitions
 * (Write.statement, insertOne). Their sessions plan each prepared statement generically
 * from its first execution (plan_cache_mode=force_generic_plan): by default PostgreSQL
 * plans the first five executions on each connection for their values (about 0.3 ms each
 * for the claim and the batched completion, against 0.1 ms executing the generic plan of an
 * empty claim), and the completion of several tasks, whose generic plan is costed for 100
 * array elements, on every execution. These statements' plans do not depend on the values
 * (primary-key lookups, the pending index in its order: their generic plans are in
 * docs/perf-notes.md, queue). The Kysely-built queries stay on the main pool: some need
 * their values to choose a partial index. In bench/queue (16 claimers, batches of 100) this
 * took PostgreSQL's CPU per task from 42.5 to 35.5 µs.
 *
 * Four: more statements at once only add contention on two cores (claims skip the rows
 * other claims hold, completions share heap pages). 10 000 tasks claimed and completed in
 * statements of 100 on 4 connections at once cost 32 µs of PostgreSQL CPU per task, on 8
 * 40 µs, on 16 about 43 µs. A fresh connection costs about 5.6 ms of PostgreSQL CPU before
 * its first claim and completion are planned.
 */
export const HOT_POOL_MAX = 4;
/** How long a hot-pool connection may stay idle before it is closed. */
const HOT_POOL_IDLE_MS = 5 * 60_000;

// int8 (bigint) columns: event ids stay decimal strings; counts we cast explicitly.
pg.types.setTypeParser(20, (v) => v);

/**
 * PostgreSQL ends a session left idle inside a transaction this long. A transaction that has
 * inserted a feed event holds the watermark of every replica's readers until it ends
 * (feed/sequencer.ts); a replica cut off from PostgreSQL mid-transaction would otherwise hold
 * the feed until TCP keep-alive gave up (hours). No tower transaction waits this long between
 * its statements.
 */
export const IDLE_IN_TRANSACTION_TIMEOUT_MS = 30_000;

export function parsePostgresUrl(url: string): { config: pg.ClientConfig; schema: string | null } {
  const u = new URL(url);
  const schema = u.searchParams.get('schema');
  u.searchParams.delete('schema');
  if (schema !== null && !/^[a-z_][a-z0-9_]{0,62}$/.test(schema)) {
    throw new Error(`invalid schema name "${schema}" in database URL: use lowercase letters, digits and _`);
  }
  const config: pg.ClientConfig = {
    connectionString: u.toString(),
    options: [
      ...(schema ? [`-c search_path=${schema}`] : []),
      `-c idle_in_transaction_session_timeout=${IDLE_IN_TRANSACTION_TIMEOUT_MS}`,
    ].join(' '),
  };
  return { config, schema };
}

export async function openStore(opts: OpenStoreOptions): Promise<Store> {
  if (opts.database && /^postgres(ql)?:\/\//.test(opts.database)) {
    const { config: base, schema } = parsePostgresUrl(opts.database);
    const timeouts = opts.timeouts ?? DEFAULT_STORE_TIMEOUTS;
    const config = timedConfig(base, timeouts);
    const maintenance = timedConfig(base, { ...timeouts, statementTimeoutMs: 0 });
    if (schema) await ensureSchema(maintenance, schema);
    const onError = opts.onConnectionError ?? (() => {});
    // A broken connection of a pool is dropped by the pool and replaced on next use.
    const pool = createPool({ ...config, max: opts.poolSize ?? 10 }, onError);
    const db = new Kysely<Tables>({ dialect: new PostgresDialect({ pool: kyselyPool(pool) }) });
    const hot = createPool(
      {
        ...config,
        options: `${config.options} -c plan_cache_mode=force_generic_plan`,
        max: HOT_POOL_MAX,
        // Kept open through quiet spells (pg-pool closes idle connections after 10 s by
        // default): a new one costs its first claim about 5.6 ms of PostgreSQL CPU.
        idleTimeoutMillis: HOT_POOL_IDLE_MS,
      },
      onError,
    );
    const u = new URL(opts.database);
    u.password = '';
    return {
      db,
      reader: db,
      dialect: 'postgres',
      schema,
      pgConfig: config,
      pgMaintenanceConfig: maintenance,
      pgPool: pool,
      pgHotPool: hot,
      describe: `postgres ${u.host}${u.pathname}${schema ? ` schema ${schema}` : ''}`,
      close: async () => {
        await Promise.all([db.destroy(), hot.end()]);
      },
    };
  }
  if (opts.database && opts.database !== 'sqlite') {
    throw new Error(`unsupported --database "${opts.database}": use postgres://… or omit it for SQLite`);
  }
  // tower.db holds the node signing keys and every token hash: private, whatever the umask or
  // the data directory's earlier mode; an existing one others can read is refused.
  ensurePrivateDir(opts.dataDir);
  const file = join(opts.dataDir, 'tower.db');
  refuseSharedFiles(
    [file, `${file}-wal`, `${file}-shm`, join(opts.dataDir, 'admin.token')],
    "The tower's database and admin token",
  );
  ensurePrivateFile(file);
  // The writer waits for another process's lock between attempts, not inside SQLite (store/tx.ts).
  const sqlite = openSqlite(file, { synchronous: 'NORMAL', foreignKeys: true, busyTimeoutMs: 0 });
  const db = new Kysely<Tables>({ dialect: new SqliteDialect({ database: sqlite.kysely }) });
  // WAL readers wait for a lock only in rare moments (another process recovering the WAL).
  const readConn = openSqlite(file, { synchronous: 'NORMAL', readonly: true, busyTimeoutMs: 1000 });
  const reader = new Kysely<Tables>({ dialect: new SqliteDialect({ database: readConn.kysely }) });
  return {
    db,
    reader,
    dialect: 'sqlite',
    schema: null,
    pgConfig: null,
    pgMaintenanceConfig: null,
    pgPool: null,
    pgHotPool: null,
    describe: `sqlite ${file}`,
    close: async () => {
      await reader.destroy();
      await db.destroy();
    },
  };
}

async function ensureSchema(config: pg.ClientConfig, schema: string): Promise<void> {
  let lost: Error | null = null;
  const client = await connectClient(config, (e) => {
    lost = e;
  });
  try {
    await client.query(`create schema if not exists "${schema}"`);
  } catch (e) {
    if (lost) throw e;
    // Two replicas creating the schema at once: the loser sees a unique violation.
    const exists = await client.query('select 1 from pg_namespace where nspname = $1', [schema]);
    if (exists.rowCount !== 1) throw e;
  } finally {
    await client.end().catch(() => {});
  }
}

// Arbitrary constant namespace for the migration lock; the second key is the schema's hash
// so towers in different schemas of one database do not wait for each other.
const MIGRATION_LOCK_NS = 0x5e5c;

/**
 * Applies every migration of `migrations` not yet recorded (the composition root hands in
 * the tower's list: src/tower/migrations.ts). Returns the versions applied by this call.
 */
export async function migrate(store: Store, clock: Clock, migrations: Migration[]): Promise<number[]> {
  if (store.dialect === 'sqlite') return applyMigrations(store.db, 'sqlite', clock, migrations);
  // Migrations may run long (DDL on big tables, waiting for another replica's lock): on
  // connections of their own without the statement timeout.
  const pool = createPool({ ...(store.pgMaintenanceConfig ?? {}), max: 2 }, () => {});
  const db = new Kysely<Tables>({ dialect: new PostgresDialect({ pool: kyselyPool(pool) }) });
  try {
    // Hold a session-level advisory lock on one dedicated connection for the whole run.
    return await db.connection().execute(async (conn) => {
      const key = sql`hashtext(current_schema())`;
      await sql`select pg_advisory_lock(${MIGRATION_LOCK_NS}, ${key})`.execute(conn);
      try {
        // The migrations themselves run on the other connection; the lock only serializes.
        return await applyMigrations(db, 'postgres', clock, migrations);
      } finally {
        await sql`select pg_advisory_unlock(${MIGRATION_LOCK_NS}, ${key})`.execute(conn);
      }
    });
  } finally {
    await db.destroy();
  }
}

async function applyMigrations(
  db: Db,
  dialect: Dialect,
  clock: Clock,
  migrations: Migration[],
): Promise<number[]> {
  await db.schema
    .createTable('svc_migrations')
    .ifNotExists()
    .addColumn('version', 'integer', (c) => c.primaryKey())
    .addColumn('name', 'text', (c) => c.notNull())
    .addColumn('applied_at', 'text', (c) => c.notNull())
    .execute();
  const done = new Set(
    (await db.selectFrom('svc_migrations').select('version').execute()).map((r) => r.version),
  );
  const applied: number[] = [];
  for (const m of [...migrations].sort((a, b) => a.version - b.version)) {
    if (done.has(m.version)) continue;
    await transaction(db, async (trx) => {
      await m.up(trx as unknown as Kysely<unknown>, dialect);
      await trx
        .insertInto('svc_migrations')
        .values({ version: m.version, name: m.name, applied_at: iso(clock.now()) })
        .execute();
    });
    applied.push(m.version);
  }
  return applied;
}
