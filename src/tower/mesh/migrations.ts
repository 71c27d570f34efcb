// The mesh area's tables: enrolled agents and mesh tasks (with broadcast runs as child rows).
import { type Kysely, sql } from 'kysely';
import type { Migration } from '../store/migrations.js';

export interface AgentRow {
  id: string;
  node_id: string;
  domain_id: string;
  name: string;
  runtime: string;
  /** JSON array of strings. */
  capabilities: string;
  status: string;
  created_at: string;
  updated_at: string;
}

export interface MeshTaskRow {
  id: string;
  mission_id: string;
  domain_id: string;
  parent_id: string | null;
  title: string;
  description: string;
  claim_policy: string;
  priority: number;
  assigned_agent_id: string | null;
  /** JSON array of strings. */
  required_capabilities: string;
  state: string;
  attempt: number;
  max_attempts: number;
  lease_seconds: number;
  lease_id: string | null;
  lease_expires_at: string | null;
  claimed_by: string | null;
  /** JSON, or null. */
  result: string | null;
  failure_reason: string | null;
  created_at: string;
  updated_at: string;
}

/** Which mission each mesh task is in (migration 22): the index listing a mission's tasks. */
export interface MeshTaskMissionRow {
  mission_id: string;
  /** The task's id. */
  id: string;
}

export interface MeshTables {
  agents: AgentRow;
  mesh_tasks: MeshTaskRow;
  mesh_task_missions: MeshTaskMissionRow;
}

// The store's table map learns this area's tables here (store/types.ts imports no area).
declare module '../store/types.js' {
  interface Tables extends MeshTables {}
}

export const meshMigration: Migration = {
  version: 20,
  name: 'mesh: agents, mesh tasks',
  async up(db: Kysely<unknown>) {
    await db.schema
      .createTable('agents')
      .addColumn('id', 'text', (c) => c.primaryKey())
      .addColumn('node_id', 'text', (c) => c.notNull().references('nodes.id').onDelete('cascade'))
      .addColumn('domain_id', 'text', (c) => c.notNull().references('domains.id').onDelete('cascade'))
      .addColumn('name', 'text', (c) => c.notNull())
      .addColumn('runtime', 'text', (c) => c.notNull())
      .addColumn('capabilities', 'text', (c) => c.notNull())
      .addColumn('status', 'text', (c) => c.notNull())
      .addColumn('created_at', 'text', (c) => c.notNull())
      .addColumn('updated_at', 'text', (c) => c.notNull())
      .execute();
    await db.schema.createIndex('agents_node').on('agents').columns(['node_id', 'id']).execute();
    await db.schema.createIndex('agents_domain').on('agents').columns(['domain_id', 'id']).execute();
    await db.schema
      .createTable('mesh_tasks')
      .addColumn('id', 'text', (c) => c.primaryKey())
      .addColumn('mission_id', 'text', (c) => c.notNull().references('missions.id').onDelete('cascade'))
      .addColumn('domain_id', 'text', (c) => c.notNull())
      .addColumn('parent_id', 'text')
      .addColumn('title', 'text', (c) => c.notNull())
      .addColumn('description', 'text', (c) => c.notNull())
      .addColumn('claim_policy', 'text', (c) => c.notNull())
      .addColumn('priority', 'integer', (c) => c.notNull())
      .addColumn('assigned_agent_id', 'text')
      .addColumn('required_capabilities', 'text', (c) => c.notNull())
      .addColumn('state', 'text', (c) => c.notNull())
      .addColumn('attempt', 'integer', (c) => c.notNull())
      .addColumn('max_attempts', 'integer', (c) => c.notNull())
      .addColumn('lease_seconds', 'integer', (c) => c.notNull())
      .addColumn('lease_id', 'text')
      .addColumn('lease_expires_at', 'text')
      .addColumn('claimed_by', 'text')
      .addColumn('result', 'text')
      .addColumn('failure_reason', 'text')
      .addColumn('created_at', 'text', (c) => c.notNull())
      .addColumn('updated_at', 'text', (c) => c.notNull())
      .execute();
    // Claims: pending tasks of a domain, highest priority first, then oldest.
    await db.schema
      .createIndex('mesh_tasks_claim')
      .on('mesh_tasks')
      .columns(['domain_id', 'state', 'priority desc', 'id'])
      .execute();
    await db.schema
      .createIndex('mesh_tasks_mission')
      .on('mesh_tasks')
      .columns(['mission_id', 'id'])
      .execute();
    await db.schema
      .createIndex('mesh_tasks_lease')
      .on('mesh_tasks')
      .columns(['state', 'lease_expires_at'])
      .execute();
    await db.schema.createIndex('mesh_tasks_parent').on('mesh_tasks').column('parent_id').execute();
  },
};

/**
 * The hot path touches only live tasks. A claim reads `mesh_tasks_pending`, which holds
 * pending tasks only (finished ones are not in it at all, however many there are); the
 * sweeper reads `mesh_tasks_leased`, which holds claimed and running ones only. Every
 * transition also writes fewer index entries: a row enters only the indexes whose predicate
 * its new state meets (a completed task: the primary key and the mission index).
 */
export const meshPartialIndexesMigration: Migration = {
  version: 21,
  name: 'mesh: partial indexes for pending, leased and broadcast-run tasks',
  async up(db: Kysely<unknown>) {
    await db.schema.dropIndex('mesh_tasks_claim').execute();
    await db.schema.dropIndex('mesh_tasks_lease').execute();
    await db.schema.dropIndex('mesh_tasks_parent').execute();
    await sql`create index mesh_tasks_pending on mesh_tasks (domain_id, priority desc, id)
      where state = 'pending'`.execute(db);
    await sql`create index mesh_tasks_leased on mesh_tasks (lease_expires_at)
      where state in ('claimed', 'running')`.execute(db);
    await sql`create index mesh_tasks_parent on mesh_tasks (parent_id)
      where parent_id is not null`.execute(db);
  },
};

/**
 * A mission's tasks are listed through `mesh_task_missions` (mission_id, id), written once
 * when a task is created and never again, instead of an index on `mesh_tasks`. Every claim
 * and every completion writes a new version of the task row and so an entry in each of its
 * indexes (a changed state keeps the update from being HOT); the mission index was one of the
 * three, with text keys inserted mid-tree: dropping it took 42.7 -> 35.8 µs of PostgreSQL CPU
 * per claimed and completed task (16 claimers, batches of 100; bench/queue).
 *
 * On PostgreSQL the index and the foreign key from `mesh_tasks.mission_id` go (the key would
 * make each mission delete scan the task table); the side table's key cascades a deleted
 * mission to its rows, and a trigger deletes their tasks by primary key. SQLite keeps its
 * index and key (it cannot drop a key without rebuilding the table, and its claims take
 * another path); the side table is written and read the same way on both.
 */
export const meshTaskMissionsMigration: Migration = {
  version: 22,
  name: 'mesh: tasks listed by mission through mesh_task_missions',
  async up(db: Kysely<unknown>, dialect) {
    await db.schema
      .createTable('mesh_task_missions')
      .addColumn('mission_id', 'text', (c) => c.notNull().references('missions.id').onDelete('cascade'))
      .addColumn('id', 'text', (c) => c.notNull())
      .addPrimaryKeyConstraint('mesh_task_missions_pkey', ['mission_id', 'id'])
      .execute();
    await sql`insert into mesh_task_missions (mission_id, id) select mission_id, id from mesh_tasks`.execute(
      db,
    );
    if (dialect !== 'postgres') return;
    await sql`drop index mesh_tasks_mission`.execute(db);
    await sql`alter table mesh_tasks drop constraint mesh_tasks_mission_id_fkey`.execute(db);
    await sql`create function mesh_task_missions_deleted() returns trigger language plpgsql as $$
      begin
        delete from mesh_tasks where id = old.id;
        return null;
      end $$`.execute(db);
    await sql`create trigger mesh_task_missions_deleted after delete on mesh_task_missions
      for each row execute function mesh_task_missions_deleted()`.execute(db);
  },
};

/**
 * PostgreSQL: the task table's key columns compare bytewise (COLLATE "C"). Each claim and
 * completion inserts entries in the primary key and the pending or leased index, and under a
 * libc collation every comparison on the way down those trees goes through strcoll. The
 * order is the same for these values (ASCII ids and ISO timestamps: digits, lower-case
 * letters and fixed punctuation at fixed places); only the indexes are rebuilt. Comparisons
 * with other tables' columns keep working: those have the default collation, which yields
 * to an explicit one. SQLite compares bytewise already.
 */
export const meshBytewiseKeysMigration: Migration = {
  version: 23,
  name: 'mesh: bytewise key columns on PostgreSQL',
  async up(db: Kysely<unknown>, dialect) {
    if (dialect !== 'postgres') return;
    await sql`alter table mesh_tasks
      alter column id type text collate "C",
      alter column domain_id type text collate "C",
      alter column lease_expires_at type text collate "C"`.execute(db);
  },
};
