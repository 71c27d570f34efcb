// The feed area's tables: idempotency keys of node-published events, approvals and inbox
// messages. (The events table itself is core: migration 1.)
import type { Kysely } from 'kysely';
import type { Migration } from '../store/migrations.js';

export interface NodeEventKeyRow {
  /** "<node_id>:<key>" */
  key: string;
  created_at: string;
}

export interface ApprovalRow {
  id: string;
  domain_id: string;
  mission_id: string | null;
  agent_id: string | null;
  title: string;
  detail: string;
  status: 'pending' | 'approved' | 'rejected';
  reason: string | null;
  requested_by: string;
  decided_by: string | null;
  created_at: string;
  decided_at: string | null;
}

export interface InboxMessageRow {
  id: string;
  domain_id: string;
  agent_id: string;
  text: string;
  sent_by: string;
  created_at: string;
}

export interface FeedTables {
  node_event_keys: NodeEventKeyRow;
  approvals: ApprovalRow;
  inbox_messages: InboxMessageRow;
}

export const feedMigration: Migration = {
  version: 10,
  name: 'feed: node event keys, approvals, inbox',
  async up(db: Kysely<unknown>) {
    await db.schema
      .createTable('node_event_keys')
      .addColumn('key', 'text', (c) => c.primaryKey())
      .addColumn('created_at', 'text', (c) => c.notNull())
      .execute();
    await db.schema
      .createIndex('node_event_keys_created')
      .on('node_event_keys')
      .column('created_at')
      .execute();
    await db.schema
      .createTable('approvals')
      .addColumn('id', 'text', (c) => c.primaryKey())
      .addColumn('domain_id', 'text', (c) => c.notNull().references('domains.id').onDelete('cascade'))
      .addColumn('mission_id', 'text')
      .addColumn('agent_id', 'text')
      .addColumn('title', 'text', (c) => c.notNull())
      .addColumn('detail', 'text', (c) => c.notNull().defaultTo(''))
      .addColumn('status', 'text', (c) => c.notNull())
      .addColumn('reason', 'text')
      .addColumn('requested_by', 'text', (c) => c.notNull())
      .addColumn('decided_by', 'text')
      .addColumn('created_at', 'text', (c) => c.notNull())
      .addColumn('decided_at', 'text')
      .execute();
    await db.schema.createIndex('approvals_domain').on('approvals').columns(['domain_id', 'id']).execute();
    await db.schema.createIndex('approvals_status').on('approvals').columns(['status', 'id']).execute();
    await db.schema
      .createTable('inbox_messages')
      .addColumn('id', 'text', (c) => c.primaryKey())
      .addColumn('domain_id', 'text', (c) => c.notNull().references('domains.id').onDelete('cascade'))
      .addColumn('agent_id', 'text', (c) => c.notNull())
      .addColumn('text', 'text', (c) => c.notNull())
      .addColumn('sent_by', 'text', (c) => c.notNull())
      .addColumn('created_at', 'text', (c) => c.notNull())
      .execute();
    await db.schema.createIndex('inbox_agent').on('inbox_messages').columns(['agent_id', 'id']).execute();
  },
};
