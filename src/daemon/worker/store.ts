// What the task worker keeps in state.db: the work loops `svc run` started (resumed when svcd
// restarts) and the subagent runs in flight (process group + run marker), so a restarted svcd
// can kill subagents a crashed one left behind instead of letting them run unsupervised.
import type { RuntimeKind } from '../../protocol/runtimes.js';
import type { StateMigration, StateStore } from '../state/store.js';

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
    up(db) {
      db.exec(`
        create table "worker_loops" ("loop_key" text primary key, "runtime" text not null,
          "domain_id" text not null, "agent_id" text not null, "max_concurrent" integer not null,
          "poll_ms" integer not null, "timeout_ms" integer, "started_at" text not null);
        create table "worker_runs" ("task_id" text primary key, "run_id" text not null,
          "pgid" integer not null, "agent_id" text not null, "started_at" text not null);`);
    },
  },
  {
    version: 2,
    name: 'worker loops: task_ready switch',
    up(db) {
      db.exec('alter table "worker_loops" add column "task_ready" integer default 1 not null');
    },
  },
];

const LOOP_COLUMNS = [
  'loop_key',
  'runtime',
  'domain_id',
  'agent_id',
  'max_concurrent',
  'poll_ms',
  'timeout_ms',
  'started_at',
  'task_ready',
] as const;
const RUN_COLUMNS = ['task_id', 'run_id', 'pgid', 'agent_id', 'started_at'] as const;

/** insert … on conflict (key) do update: every column of the row replaced. */
function upsert(table: string, columns: readonly string[], key: string): string {
  const q = (c: string) => `"${c}"`;
  return (
    `insert into "${table}" (${columns.map(q).join(', ')}) values (${columns.map(() => '?').join(', ')}) ` +
    `on conflict (${q(key)}) do update set ${columns.map((c) => `${q(c)} = excluded.${q(c)}`).join(', ')}`
  );
}
const SAVE_LOOP = upsert('worker_loops', LOOP_COLUMNS, 'loop_key');
const SAVE_RUN = upsert('worker_runs', RUN_COLUMNS, 'task_id');

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
  const db = state.db;
  return {
    migrate: () => state.migrate('worker', MIGRATIONS),
    async loops() {
      return db.all<LoopRow>('select * from "worker_loops" order by "started_at"');
    },
    async saveLoop(row) {
      db.run(
        SAVE_LOOP,
        LOOP_COLUMNS.map((c) => row[c]),
      );
    },
    async removeLoop(key) {
      db.run('delete from "worker_loops" where "loop_key" = ?', [key]);
    },
    async runs() {
      return db.all<RunRow>('select * from "worker_runs"');
    },
    async saveRun(row) {
      db.run(
        SAVE_RUN,
        RUN_COLUMNS.map((c) => row[c]),
      );
    },
    async removeRun(taskId) {
      db.run('delete from "worker_runs" where "task_id" = ?', [taskId]);
    },
  };
}
