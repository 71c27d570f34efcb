// What the supervisor keeps in state.db across svcd restarts: per agent, whether it is
// paused, which unit and pid it last ran (to re-adopt or reap it), its restart count; and a
// short history of watchdog and operator actions for `supervise status`.
import type { StateMigration, StateStore } from '../state/store.js';

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
    up(db) {
      db.exec(`
        create table "supervisor_agents" ("agent_id" text primary key, "paused" integer default 0 not null,
          "backend" text, "unit" text, "pid" integer, "restarts" integer default 0 not null);
        create table "supervisor_history" ("seq" integer primary key autoincrement, "agent_id" text not null,
          "at" text not null, "action" text not null, "reason" text not null);
        create index "supervisor_history_agent" on "supervisor_history" ("agent_id", "seq");`);
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
  const db = state.db;
  return {
    migrate: () => state.migrate('supervisor', MIGRATIONS),
    async all() {
      const rows = db.all<SupervisorTables['supervisor_agents']>('select * from "supervisor_agents"');
      return new Map(
        rows.map((r) => [
          r.agent_id,
          { paused: r.paused === 1, backend: r.backend, unit: r.unit, pid: r.pid, restarts: r.restarts },
        ]),
      );
    },
    async save(agentId, row) {
      const v = [agentId, row.paused ? 1 : 0, row.backend, row.unit, row.pid, row.restarts];
      db.run(
        `insert into "supervisor_agents" ("agent_id", "paused", "backend", "unit", "pid", "restarts")
         values (?, ?, ?, ?, ?, ?) on conflict ("agent_id") do update set "agent_id" = ?, "paused" = ?,
         "backend" = ?, "unit" = ?, "pid" = ?, "restarts" = ?`,
        [...v, ...v],
      );
    },
    async remove(agentId) {
      db.run('delete from "supervisor_agents" where "agent_id" = ?', [agentId]);
    },
    async addHistory(agentId, e) {
      db.transaction(() => {
        db.run(
          'insert into "supervisor_history" ("agent_id", "at", "action", "reason") values (?, ?, ?, ?)',
          [agentId, e.at, e.action, e.reason],
        );
        const keep = db.get<{ seq: number }>(
          'select "seq" from "supervisor_history" where "agent_id" = ? order by "seq" desc limit 1 offset ?',
          [agentId, HISTORY_KEPT - 1],
        );
        if (keep?.seq != null) {
          db.run('delete from "supervisor_history" where "agent_id" = ? and "seq" < ?', [agentId, keep.seq]);
        }
      });
    },
    async history(agentId) {
      const rows = db.all<HistoryEntry>(
        'select "at", "action", "reason" from "supervisor_history" where "agent_id" = ? order by "seq" desc limit ?',
        [agentId, HISTORY_KEPT],
      );
      return rows.reverse();
    },
  };
}
