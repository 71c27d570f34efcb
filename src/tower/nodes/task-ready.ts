// task_ready (DESIGN §3): when a mesh task becomes claimable (new, retried, lease expired),
// every node with an agent that could claim it is told on its control channel.
//
// A node's channel is held by one replica, and the change may be made on another. So on
// PostgreSQL the replica that made the change, after its commit, NOTIFYs the task on a
// per-schema channel (one notification per batch of tasks, outside the write's
// transaction: notifying transactions serialize their commits); every replica LISTENs and
// tells the nodes connected to it. The maker tells its own nodes at once and ignores its own
// notification. A lost notification (the LISTEN connection was down) only delays work:
// workers also poll.
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import type { Logger } from '../../lib/log.js';
import type { MeshTask } from '../../protocol/mesh.js';
import type { Store } from '../store/open.js';
import type { Db } from '../store/types.js';
import type { ControlHub } from './control-hub.js';

/** Which nodes could claim `task`: those with an agent of its domain (the assigned agent
 * only, for assigned tasks) that has the required capabilities. `among`: only these nodes. */
export async function nodesForTask(db: Db, task: ReadyTask, among?: string[]): Promise<string[]> {
  if (among && among.length === 0) return [];
  let q = db.selectFrom('agents').select(['node_id', 'capabilities']).where('domain_id', '=', task.domain_id);
  if (task.assigned_agent_id) q = q.where('id', '=', task.assigned_agent_id);
  if (among) q = q.where('node_id', 'in', among);
  const need = task.required_capabilities;
  const nodes = new Set<string>();
  for (const a of await q.execute()) {
    const have = new Set(JSON.parse(a.capabilities) as string[]);
    if (need.every((c) => have.has(c))) nodes.add(a.node_id);
  }
  return [...nodes];
}

export type ReadyTask = Pick<
  MeshTask,
  'id' | 'mission_id' | 'domain_id' | 'assigned_agent_id' | 'required_capabilities'
>;

/** Channel of task_ready notifications between replicas sharing a schema. */
export function taskReadyChannel(schema: string | null): string {
  return schema ? `svc_task_ready_${schema}` : 'svc_task_ready';
}

/** NOTIFY payloads are limited to 8000 bytes: tasks per notification. */
const PER_NOTIFY = 20;
/** Retry of a lost LISTEN connection. */
const RELISTEN_MS = 1000;

interface Wire {
  /** Replica that made the change. */
  o: string;
  t: ReadyTask[];
}

export interface TaskReadyRelay {
  /** A task became claimable on this replica (after its commit). */
  ready(task: ReadyTask): void;
  start(): Promise<void>;
  stop(): Promise<void>;
}

export function createTaskReadyRelay(deps: { store: Store; nodes: ControlHub; log: Logger }): TaskReadyRelay {
  const { store, nodes } = deps;
  const log = deps.log.child({ component: 'task-ready' });
  const origin = randomBytes(8).toString('hex');
  const channel = taskReadyChannel(store.schema);
  const pgStore = store.dialect === 'postgres' && store.pgPool !== null;
  let listener: pg.Client | null = null;
  let relisten: NodeJS.Timeout | null = null;
  let stopped = false;
  let outgoing: ReadyTask[] = [];

  /** Tells the nodes connected here that could claim these tasks. */
  async function tellLocal(tasks: ReadyTask[]): Promise<void> {
    const here = nodes.connectedNodes();
    if (here.length === 0) return;
    for (const task of tasks) {
      for (const id of await nodesForTask(store.db, task, here)) {
        nodes.send(id, {
          type: 'task_ready',
          task_id: task.id,
          mission_id: task.mission_id,
          domain_id: task.domain_id,
        });
      }
    }
  }

  function flush(): void {
    const tasks = outgoing;
    outgoing = [];
    for (let i = 0; i < tasks.length; i += PER_NOTIFY) {
      const payload = JSON.stringify({ o: origin, t: tasks.slice(i, i + PER_NOTIFY) } satisfies Wire);
      (store.pgPool as pg.Pool)
        .query('select pg_notify($1, $2)', [channel, payload])
        .catch((e: unknown) => log.warn({ err: e }, 'cannot notify other replicas of ready tasks'));
    }
  }

  async function listen(): Promise<void> {
    if (stopped || listener || !store.pgConfig) return;
    const c = new pg.Client(store.pgConfig);
    const retry = () => {
      if (listener === c) listener = null;
      if (!stopped && !relisten) {
        relisten = setTimeout(() => {
          relisten = null;
          void listen();
        }, RELISTEN_MS);
      }
    };
    c.on('error', (e) => {
      log.warn({ err: e.message }, 'task_ready LISTEN connection lost; reconnecting');
      retry();
    });
    c.on('notification', (n) => {
      let wire: Wire;
      try {
        wire = JSON.parse(n.payload ?? '') as Wire;
      } catch {
        return;
      }
      if (wire.o === origin || !Array.isArray(wire.t)) return;
      tellLocal(wire.t).catch((e: unknown) => log.warn({ err: e }, 'cannot send task_ready'));
    });
    try {
      await c.connect();
      await c.query(`listen "${channel}"`);
      listener = c;
      if (stopped) await c.end().catch(() => {});
    } catch (e) {
      log.warn({ err: e }, 'cannot LISTEN for task_ready of other replicas; retrying');
      await c.end().catch(() => {});
      retry();
    }
  }

  return {
    ready(task) {
      const t: ReadyTask = {
        id: task.id,
        mission_id: task.mission_id,
        domain_id: task.domain_id,
        assigned_agent_id: task.assigned_agent_id,
        required_capabilities: task.required_capabilities,
      };
      tellLocal([t]).catch((e: unknown) => log.warn({ err: e, task: t.id }, 'cannot send task_ready'));
      if (!pgStore || stopped) return;
      // Tasks made ready in the same tick (a broadcast, a sweep) share notifications.
      if (outgoing.length === 0) setImmediate(flush);
      outgoing.push(t);
    },
    async start() {
      if (pgStore) await listen();
    },
    async stop() {
      stopped = true;
      if (relisten) clearTimeout(relisten);
      if (outgoing.length > 0) flush();
      const l = listener;
      listener = null;
      await l?.end().catch(() => {});
    },
  };
}
