// Versioned schema migrations: their shape, and the store's own (core records and the probe
// row). Each area keeps its migrations beside its code; the composition root lists them all
// in order (src/tower/migrations.ts) and hands the list to migrate() (store/open.ts), which
// runs each in its own transaction and records it in svc_migrations.
import { type Kysely, sql } from 'kysely';
import type { Dialect } from './types.js';

export interface Migration {
  version: number;
  name: string;
  up(db: Kysely<unknown>, dialect: Dialect): Promise<void>;
}

/** Auto-increment bigint primary key, the one column type that differs between stores. */
export function serialPk(dialect: Dialect) {
  return dialect === 'postgres' ? sql`bigserial primary key` : sql`integer primary key autoincrement`;
}

const core: Migration = {
  version: 1,
  name: 'core records, tokens, signing keys, nodes, events',
  async up(db, dialect) {
    await db.schema
      .createTable('domains')
      .addColumn('id', 'text', (c) => c.primaryKey())
      .addColumn('name', 'text', (c) => c.notNull())
      .addColumn('description', 'text', (c) => c.notNull().defaultTo(''))
      .addColumn('created_at', 'text', (c) => c.notNull())
      .addColumn('updated_at', 'text', (c) => c.notNull())
      .execute();
    await db.schema
      .createTable('missions')
      .addColumn('id', 'text', (c) => c.primaryKey())
      .addColumn('domain_id', 'text', (c) => c.notNull().references('domains.id').onDelete('cascade'))
      .addColumn('name', 'text', (c) => c.notNull())
      .addColumn('description', 'text', (c) => c.notNull().defaultTo(''))
      .addColumn('repository', 'text')
      .addColumn('created_at', 'text', (c) => c.notNull())
      .addColumn('updated_at', 'text', (c) => c.notNull())
      .execute();
    await db.schema.createIndex('missions_domain').on('missions').columns(['domain_id', 'id']).execute();
    for (const table of ['board_tasks', 'documents', 'artifacts'] as const) {
      let t = db.schema
        .createTable(table)
        .addColumn('id', 'text', (c) => c.primaryKey())
        .addColumn('domain_id', 'text', (c) => c.notNull())
        .addColumn('mission_id', 'text', (c) => c.notNull().references('missions.id').onDelete('cascade'));
      if (table === 'board_tasks') {
        t = t
          .addColumn('title', 'text', (c) => c.notNull())
          .addColumn('description', 'text', (c) => c.notNull().defaultTo(''))
          .addColumn('status', 'text', (c) => c.notNull());
      } else if (table === 'documents') {
        t = t
          .addColumn('title', 'text', (c) => c.notNull())
          .addColumn('content_type', 'text', (c) => c.notNull())
          .addColumn('content', 'text', (c) => c.notNull());
      } else {
        t = t
          .addColumn('name', 'text', (c) => c.notNull())
          .addColumn('uri', 'text')
          .addColumn('content_type', 'text')
          .addColumn('size_bytes', 'bigint')
          .addColumn('metadata', 'text', (c) => c.notNull().defaultTo('{}'));
      }
      await t
        .addColumn('created_at', 'text', (c) => c.notNull())
        .addColumn('updated_at', 'text', (c) => c.notNull())
        .execute();
      await db.schema.createIndex(`${table}_mission`).on(table).columns(['mission_id', 'id']).execute();
    }
    await db.schema
      .createTable('tokens')
      .addColumn('id', 'text', (c) => c.primaryKey())
      .addColumn('name', 'text', (c) => c.notNull())
      .addColumn('token_hash', 'text', (c) => c.notNull().unique())
      .addColumn('scopes', 'text', (c) => c.notNull())
      .addColumn('domains', 'text')
      .addColumn('expires_at', 'text')
      .addColumn('revoked_at', 'text')
      .addColumn('created_at', 'text', (c) => c.notNull())
      .execute();
    await db.schema
      .createTable('signing_keys')
      .addColumn('kid', 'text', (c) => c.primaryKey())
      .addColumn('alg', 'text', (c) => c.notNull())
      .addColumn('public_jwk', 'text', (c) => c.notNull())
      .addColumn('private_jwk', 'text', (c) => c.notNull())
      .addColumn('created_at', 'text', (c) => c.notNull())
      .addColumn('retired_at', 'text')
      .execute();
    await db.schema
      .createTable('nodes')
      .addColumn('id', 'text', (c) => c.primaryKey())
      .addColumn('hostname', 'text', (c) => c.notNull().unique())
      .addColumn('jti', 'text', (c) => c.notNull())
      .addColumn('domains', 'text')
      .addColumn('created_at', 'text', (c) => c.notNull())
      .addColumn('updated_at', 'text', (c) => c.notNull())
      .execute();
    // Event ids must grow in the order events become visible. SQLite has one writer, so the
    // rowid does; on PostgreSQL concurrent commits can finish out of id order, so rows were
    // inserted with id NULL and numbered after commit. Since migration 11 (feed/migrations.ts)
    // they get their id at insert and readers stay below a watermark instead.
    let events = db.schema.createTable('events');
    events =
      dialect === 'postgres'
        ? events
            .addColumn('pk', 'bigserial', (c) => c.primaryKey())
            .addColumn('id', 'bigint', (c) => c.unique())
        : events.addColumn('id', sql`integer primary key autoincrement`);
    await events
      .addColumn('ts', 'text', (c) => c.notNull())
      .addColumn('type', 'text', (c) => c.notNull())
      .addColumn('domain_id', 'text')
      .addColumn('mission_id', 'text')
      .addColumn('agent_id', 'text')
      .addColumn('status', 'text')
      .addColumn('payload', 'text', (c) => c.notNull())
      .execute();
    if (dialect === 'postgres') {
      await sql`create index events_unsequenced on events (pk) where id is null`.execute(db);
    }
    await db.schema.createIndex('events_ts').on('events').column('ts').execute();
  },
};

/** One row that /readyz rewrites to learn whether writes work again (store/readiness.ts). */
const storeProbe: Migration = {
  version: 2,
  name: 'store probe row',
  async up(db) {
    await db.schema
      .createTable('store_probe')
      .addColumn('id', 'integer', (c) => c.primaryKey())
      .addColumn('at', 'text', (c) => c.notNull())
      .execute();
  },
};

/** The store's own migrations (versions 1 and 2). */
export const STORE_MIGRATIONS: Migration[] = [core, storeProbe];
