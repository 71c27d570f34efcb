// What the supervisor keeps in state.db across svcd restarts: per agent, whether it is
// paused, which unit and pid it last ran (to re-adopt or reap it), its restart count; and a
// short history of watchdog and operator actions for `supervise status`.
import type { Kysely } from 'kysely';
import type { StateMigration, StateStore } from '../context.js';

export interface SupervisorTables {
  supervisor_agents: {
    agent_id: string;
    paused: number;
    backend: string | null;
    unit: string | null;
    pid: number | null;
    restarts: number;
  };
  supervisor_history: {
    seq: number | null;
    agent_id: string;
    at: string;
    action: string;
    reason: string;
  };
}

export const HISTORY_KEPT = 20;

const MIGRATIONS: StateMigration[] = [
  {
    version: 1,
    name: 'supervisor agents and history',
    async up(db) {
      await db.schema
        .createTable('supervisor_agents')
        .addColumn('agent_id', 'text', (c) => c.primaryKey())
        .addColumn('paused', 'integer', (c) => c.notNull().defaultTo(0))
        .addColumn('backend', 'text')
        .addColumn('unit', 'text')
        .addColumn('pid', 'integer')
        .addColumn('restarts', 'integer', (c) => c.notNull().defaultTo(0))
        .execute();
      await db.schema
        .createTable('supervisor_history')
        .addColumn('seq', 'integer', (c) => c.primaryKey().autoIncrement())
        .addColumn('agent_id', 'text', (c) => c.notNull())
        .addColumn('at', 'text', (c) => c.notNull())
        .addColumn('action', 'text', (c) => c.notNull())
        .addColumn('reason', 'text', (c) => c.notNull())
        .execute();
      await db.schema
        .createIndex('supervisor_history_agent')
        .on('supervisor_history')
        .columns(['agent_id', 'seq'])
        .execute();
    },
  },
];

export interface AgentRow {
  paused: boolean;
  backend: string | null;
  unit: string | null;
  pid: number | null;
  restarts: number;
}

export interface HistoryEntry {
  at: string;
  action: string;
  reason: string;
}

export interface SupervisorStore {
  migrate(): Promise<void>;
  all(): Promise<Map<string, AgentRow>>;
  save(agentId: string, row: AgentRow): Promise<void>;
  remove(agentId: string): Promise<void>;
  addHistory(agentId: string, e: HistoryEntry): Promise<void>;
  history(agentId: string): Promise<HistoryEntry[]>;
}

export function createSupervisorStore(state: StateStore): SupervisorStore {
  const db = state.db as unknown as Kysely<SupervisorTables>;
  return {
    migrate: () => state.migrate('supervisor', MIGRATIONS),
    async all() {
      const rows = await db.selectFrom('supervisor_agents').selectAll().execute();
      return new Map(
        rows.map((r) => [
          r.agent_id,
          { paused: r.paused === 1, backend: r.backend, unit: r.unit, pid: r.pid, restarts: r.restarts },
        ]),
      );
    },
    async save(agentId, row) {
      const values = {
        agent_id: agentId,
        paused: row.paused ? 1 : 0,
        backend: row.backend,
        unit: row.unit,
        pid: row.pid,
        restarts: row.restarts,
      };
      await db
        .insertInto('supervisor_agents')
        .values(values)
        .onConflict((oc) => oc.column('agent_id').doUpdateSet(values))
        .execute();
    },
    async remove(agentId) {
      await db.deleteFrom('supervisor_agents').where('agent_id', '=', agentId).execute();
    },
    async addHistory(agentId, e) {
      await db.transaction().execute(async (trx) => {
        await trx
          .insertInto('supervisor_history')
          .values({ agent_id: agentId, ...e })
          .execute();
        const keep = await trx
          .selectFrom('supervisor_history')
          .select('seq')
          .where('agent_id', '=', agentId)
          .orderBy('seq', 'desc')
          .offset(HISTORY_KEPT - 1)
          .limit(1)
          .executeTakeFirst();
        if (keep?.seq != null) {
          await trx
            .deleteFrom('supervisor_history')
            .where('agent_id', '=', agentId)
            .where('seq', '<', keep.seq)
            .execute();
        }
      });
    },
    async history(agentId) {
      const rows = await db
        .selectFrom('supervisor_history')
        .select(['at', 'action', 'reason'])
        .where('agent_id', '=', agentId)
        .orderBy('seq', 'desc')
        .limit(HISTORY_KEPT)
        .execute();
      return rows.reverse();
    },
  };
}
