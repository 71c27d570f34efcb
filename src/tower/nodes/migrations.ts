// The nodes area's tables: which replica holds each node's control channel (presence shared
// by every replica), and the replicas themselves with their heartbeat and the address the
// others reach them at (nodes/presence.ts).
import type { Migration } from '../store/migrations.js';

export interface NodesTables {
  /** One row per live tower replica, renewed every PRESENCE_RENEW_MS. */
  tower_replicas: { id: string; address: string; started_at: string; renewed_at: string };
  /** The replica holding each connected node's channel (a row of a stale replica counts for none). */
  node_channels: { node_id: string; replica_id: string; connected_at: string };
}

declare module '../store/types.js' {
  interface Tables extends NodesTables {}
}

export const nodePresenceMigration: Migration = {
  version: 40,
  name: 'node presence across replicas',
  async up(db) {
    await db.schema
      .createTable('tower_replicas')
      .addColumn('id', 'text', (c) => c.primaryKey())
      .addColumn('address', 'text', (c) => c.notNull())
      .addColumn('started_at', 'text', (c) => c.notNull())
      .addColumn('renewed_at', 'text', (c) => c.notNull())
      .execute();
    await db.schema
      .createTable('node_channels')
      .addColumn('node_id', 'text', (c) => c.primaryKey())
      .addColumn('replica_id', 'text', (c) => c.notNull())
      .addColumn('connected_at', 'text', (c) => c.notNull())
      .execute();
    await db.schema.createIndex('node_channels_replica').on('node_channels').column('replica_id').execute();
  },
};
