// The feed area's tables: idempotency keys of node-published events, approvals and inbox
// messages. (The events table itself is core: migration 1; how its ids are given: 11.)
import { type Kysely, sql } from 'kysely';
import { EVENT_BLOCK_MAX } from '../store/event-blocks.js';
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

// The store's table map learns this area's tables here (store/types.ts imports no area).
declare module '../store/types.js' {
  interface Tables extends FeedTables {}
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

/**
 * PostgreSQL: event ids assigned at insert from a sequence, instead of by the sequencer
 * updating every committed row afterwards (a second row version and three index entries per
 * event, the largest single cost of the mesh hot path). Ids are then in insertion order,
 * not commit order, so readers read through `feed_events`: the events at or below the
 * watermark `event_watermark.w`, below which every id belongs to a transaction that has
 * ended (feed/sequencer.ts). SQLite has one writer: its rowid is already commit order, and
 * `feed_events` is the whole table.
 *
 * Upgrading a store keeps every event and its id: rows the old sequencer had not numbered
 * yet are numbered first (in insertion order, as it would have), and the sequence starts
 * after the highest id. The sequence must not cache values (CACHE 1, the default): the
 * watermark reads its last value as the highest id handed out.
 */
export const feedEventIdsMigration: Migration = {
  version: 11,
  name: 'feed: event ids at insert, read below a watermark',
  async up(db: Kysely<unknown>, dialect) {
    if (dialect !== 'postgres') {
      await sql`create view feed_events as select * from events`.execute(db);
      return;
    }
    // Writers of replicas still running the old code wait until this transaction ends.
    await sql`lock table events in exclusive mode`.execute(db);
    await sql`with pending as (
        select pk, row_number() over (order by pk) as n from events where id is null
      ), base as (select coalesce(max(id), 0) as b from events)
      update events set id = base.b + pending.n from pending, base where events.pk = pending.pk`.execute(db);
    await sql`create sequence events_id_seq as bigint cache 1`.execute(db);
    await sql`select setval('events_id_seq', coalesce(max(id), 0) + 1, false) from events`.execute(db);
    // Dropping pk drops its primary key and the partial index of unnumbered rows.
    await sql`alter table events drop column pk`.execute(db);
    await sql`alter table events alter column id set not null,
      alter column id set default nextval('events_id_seq'),
      drop constraint events_id_key, add constraint events_pkey primary key (id)`.execute(db);
    await sql`alter sequence events_id_seq owned by events.id`.execute(db);
    await sql`create table event_watermark (w bigint not null)`.execute(db);
    await sql`insert into event_watermark select coalesce(max(id), 0) from events`.execute(db);
    await sql`create view feed_events as
      select * from events where id <= (select w from event_watermark)`.execute(db);
  },
};

/**
 * A block: the events of one batch transition (a mesh claim or completion of up to hundreds
 * of tasks) in ONE row, `n` events with ids `id` .. `id + n - 1`, instead of a row (a heap
 * tuple and two index entries) per event: the largest cost of PostgreSQL's share of the mesh
 * hot path after the task rows themselves. Readers expand blocks (feed/event-log.ts
 * eventsFromRow); what clients see is unchanged, one event per id.
 *
 * On PostgreSQL the id sequence steps by EVENT_BLOCK_MAX, so each row owns the ids up to the
 * next row's: ids stay strictly increasing in the order events become visible (a block is
 * readable below the watermark as a whole, with the row that holds it). Ids were never dense
 * (a rolled-back insert leaves a hole); they now grow by EVENT_BLOCK_MAX per row. SQLite
 * writes no blocks (its rowid stays as it is); it gets the column so readers are the same.
 * Existing events keep their ids; `feed_events` is recreated to carry the column.
 */
export const feedEventBlocksMigration: Migration = {
  version: 12,
  name: 'feed: a batch transition writes its events as one block row',
  async up(db: Kysely<unknown>, dialect) {
    await sql`alter table events add column n integer`.execute(db);
    if (dialect !== 'postgres') {
      await sql`drop view feed_events`.execute(db);
      await sql`create view feed_events as select * from events`.execute(db);
      return;
    }
    await sql`alter sequence events_id_seq increment by ${sql.lit(EVENT_BLOCK_MAX)}`.execute(db);
    await sql`create or replace view feed_events as
      select * from events where id <= (select w from event_watermark)`.execute(db);
  },
};

/**
 * PostgreSQL: a block's payload (about 250 bytes of JSON per event, 25 KB for 100) is past
 * the 2 KiB at which PostgreSQL compresses a row's values: with pglz that was 2.3% of the
 * backends' CPU in the queue drain, with lz4 0.2%. A block of 100 compresses to about 1 KB
 * and stays in the row either way; a coalesced completion of up to 500 compresses to several
 * KB, which past 2 KiB went to the TOAST table as chunks with an index entry each: rows are
 * now kept inline up to 8 KiB. Rows written before keep their form (both read the same).
 * Where the server was built without lz4 the default compression stays.
 */
export const feedEventCompressionMigration: Migration = {
  version: 13,
  name: 'feed: event payloads compressed with lz4 and kept inline up to 8 KiB',
  async up(db: Kysely<unknown>, dialect) {
    if (dialect !== 'postgres') return;
    await sql`alter table events set (toast_tuple_target = 8160)`.execute(db);
    await sql`do $$ begin
        alter table events alter column payload set compression lz4;
      exception when feature_not_supported then
        raise notice 'lz4 is not available: event payloads keep the default compression';
      end $$`.execute(db);
  },
};

/**
 * The highest event id pruning has deleted (`event_pruned.through`, one row), so the hub can
 * tell exactly whether a resume lost events: only when it starts below that id. Before, the
 * hub compared the resume point with the oldest id kept, which with ids that are not dense
 * (PostgreSQL: blocks, aborted inserts) sent a `reset` to a client that had missed nothing.
 * Existing logs start from what the old rule assumed: everything below the oldest kept id.
 */
export const feedEventPrunedMigration: Migration = {
  version: 14,
  name: 'feed: the highest pruned event id',
  async up(db: Kysely<unknown>) {
    await sql`create table event_pruned (through bigint not null)`.execute(db);
    await sql`insert into event_pruned (through) select coalesce(min(id) - 1, 0) from events where id is not null`.execute(
      db,
    );
  },
};
