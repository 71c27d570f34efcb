// What the task worker keeps in state.db: the work loops `svc run` started (resumed when svcd
// restarts) and the subagent runs in flight (process group + run marker), so a restarted svcd
// can kill subagents a crashed one left behind instead of letting them run unsupervised.
import type { Kysely } from 'kysely';
import type { RuntimeKind } from '../../protocol/runtimes.js';
import type { StateMigration, StateStore } from '../context.js';

export interface WorkerTables {
  worker_loops: {
    loop_key: string;
    runtime: string;
    domain_id: string;
    agent_id: string;
    max_concurrent: number;
    poll_ms: number;
    timeout_ms: number | null;
    started_at: string;
    /** 0: this loop ignores task_ready and finds work by polling only. */
    task_ready: number;
  };
  worker_runs: {
    task_id: string;
    run_id: string;
    pgid: number;
    agent_id: string;
    started_at: string;
  };
}

const MIGRATIONS: StateMigration[] = [
  {
    version: 1,
    name: 'worker loops and runs',
    async up(db) {
      await db.schema
        .createTable('worker_loops')
        .addColumn('loop_key', 'text', (c) => c.primaryKey())
        .addColumn('runtime', 'text', (c) => c.notNull())
        .addColumn('domain_id', 'text', (c) => c.notNull())
        .addColumn('agent_id', 'text', (c) => c.notNull())
        .addColumn('max_concurrent', 'integer', (c) => c.notNull())
        .addColumn('poll_ms', 'integer', (c) => c.notNull())
        .addColumn('timeout_ms', 'integer')
        .addColumn('started_at', 'text', (c) => c.notNull())
        .execute();
      await db.schema
        .createTable('worker_runs')
        .addColumn('task_id', 'text', (c) => c.primaryKey())
        .addColumn('run_id', 'text', (c) => c.notNull())
        .addColumn('pgid', 'integer', (c) => c.notNull())
        .addColumn('agent_id', 'text', (c) => c.notNull())
        .addColumn('started_at', 'text', (c) => c.notNull())
        .execute();
    },
  },
  {
    version: 2,
    name: 'worker loops: task_ready switch',
    async up(db) {
      await db.schema
        .alterTable('worker_loops')
        .addColumn('task_ready', 'integer', (c) => c.notNull().defaultTo(1))
        .execute();
    },
  },
];

export interface LoopRow {
  loop_key: string;
  runtime: RuntimeKind;
  domain_id: string;
  agent_id: string;
  max_concurrent: number;
  poll_ms: number;
  timeout_ms: number | null;
  started_at: string;
  task_ready: number;
}

export type RunRow = WorkerTables['worker_runs'];

export interface WorkerStore {
  migrate(): Promise<void>;
  loops(): Promise<LoopRow[]>;
  saveLoop(row: LoopRow): Promise<void>;
  removeLoop(key: string): Promise<void>;
  runs(): Promise<RunRow[]>;
  saveRun(row: RunRow): Promise<void>;
  removeRun(taskId: string): Promise<void>;
}

export function createWorkerStore(state: StateStore): WorkerStore {
  const db = state.db as unknown as Kysely<WorkerTables>;
  return {
    migrate: () => state.migrate('worker', MIGRATIONS),
    async loops() {
      return (await db.selectFrom('worker_loops').selectAll().orderBy('started_at').execute()) as LoopRow[];
    },
    async saveLoop(row) {
      await db
        .insertInto('worker_loops')
        .values(row)
        .onConflict((oc) => oc.column('loop_key').doUpdateSet(row))
        .execute();
    },
    async removeLoop(key) {
      await db.deleteFrom('worker_loops').where('loop_key', '=', key).execute();
    },
    runs: () => db.selectFrom('worker_runs').selectAll().execute(),
    async saveRun(row) {
      await db
        .insertInto('worker_runs')
        .values(row)
        .onConflict((oc) => oc.column('task_id').doUpdateSet(row))
        .execute();
    },
    async removeRun(taskId) {
      await db.deleteFrom('worker_runs').where('task_id', '=', taskId).execute();
    },
  };
}
