// Task notices to nodes (docs/mesh.md): `task_ready` when a mesh task becomes claimable (new,
// retried, lease expired), to every node with an agent that could claim it; `task_cancelled`
// when a claimed or running task is cancelled, to the node of the agent holding it.
//
// A node's channel is held by one replica, and the change may be made on another. So on
// PostgreSQL the replica that made the change, after its commit, NOTIFYs the tasks on a
// per-schema channel (one notification per batch of notices, outside the write's
// transaction: notifying transactions serialize their commits); every replica LISTENs and
// tells the nodes connected to it. The maker tells its own nodes at once and ignores its own
// notification. A lost notification (the LISTEN connection was down) only delays things:
// workers also poll, and a cancelled task's lease is gone, so its worker's next heartbeat,
// progress or completion gets stale_lease and the worker stops it.
import { randomBytes } from 'node:crypto';
import type pg from 'pg';
import type { Logger } from '../../lib/log.js';
import type { MeshTask } from '../../protocol/mesh.js';
import type { Store } from '../store/open.js';
import type { PgListener } from '../store/pg-listen.js';
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

/** The node of `agentId`, when that node is one of `among`. */
async function nodeOfAgent(db: Db, agentId: string, among: string[]): Promise<string | null> {
  if (among.length === 0) return null;
  const a = await db
    .selectFrom('agents')
    .select('node_id')
    .where('id', '=', agentId)
    .where('node_id', 'in', among)
    .executeTakeFirst();
  return a?.node_id ?? null;
}

export type ReadyTask = Pick<
  MeshTask,
  'id' | 'mission_id' | 'domain_id' | 'assigned_agent_id' | 'required_capabilities'
>;

/** A claimed or running task that was cancelled, and the agent that held it. */
export interface CancelledTask {
  id: string;
  claimed_by: string;
}

/** Channel of task notices between replicas sharing a schema. */
export function taskReadyChannel(schema: string | null): string {
  return schema ? `svc_task_ready_${schema}` : 'svc_task_ready';
}

/** NOTIFY payloads are limited to 8000 bytes: notices per notification. */
const PER_NOTIFY = 20;

interface Wire {
  /** Replica that made the change. */
  o: string;
  /** Ready tasks. */
  t?: ReadyTask[];
  /** Cancelled tasks. */
  c?: CancelledTask[];
}

type Notice = { ready: ReadyTask } | { cancelled: CancelledTask };

export interface TaskRelay {
  /** A task became claimable on this replica (after its commit). */
  ready(task: ReadyTask): void;
  /** A claimed or running task was cancelled on this replica (after its commit). */
  cancelled(task: CancelledTask): void;
  start(): Promise<void>;
  stop(): Promise<void>;
}

export function createTaskRelay(deps: {
  store: Store;
  nodes: ControlHub;
  log: Logger;
  /** PostgreSQL: the replica's LISTEN connection, on which other replicas' notices arrive. */
  listener?: PgListener | null;
}): TaskRelay {
  const { store, nodes } = deps;
  const log = deps.log.child({ component: 'task-relay' });
  const origin = randomBytes(8).toString('hex');
  const channel = taskReadyChannel(store.schema);
  const pgStore = store.dialect === 'postgres' && store.pgPool !== null;
  let stopped = false;
  let outgoing: Notice[] = [];

  /** Tells the nodes connected here that could claim these tasks. */
  async function tellReady(tasks: ReadyTask[]): Promise<void> {
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

  /** Tells the nodes connected here whose agent held these tasks that they were cancelled. */
  async function tellCancelled(tasks: CancelledTask[]): Promise<void> {
    for (const task of tasks) {
      const node = await nodeOfAgent(store.db, task.claimed_by, nodes.connectedNodes());
      if (node) nodes.send(node, { type: 'task_cancelled', task_id: task.id });
    }
  }

  function tell(wire: Wire): void {
    if (wire.t?.length)
      tellReady(wire.t).catch((e: unknown) => log.warn({ err: e }, 'cannot send task_ready'));
    if (wire.c?.length) {
      tellCancelled(wire.c).catch((e: unknown) => log.warn({ err: e }, 'cannot send task_cancelled'));
    }
  }

  function queue(n: Notice): void {
    if (!pgStore || stopped) return;
    // Notices of the same tick (a broadcast, a sweep) share notifications.
    if (outgoing.length === 0) setImmediate(flush);
    outgoing.push(n);
  }

  function flush(): void {
    const notices = outgoing;
    outgoing = [];
    for (let i = 0; i < notices.length; i += PER_NOTIFY) {
      const ready: ReadyTask[] = [];
      const cancelled: CancelledTask[] = [];
      for (const n of notices.slice(i, i + PER_NOTIFY)) {
        if ('ready' in n) ready.push(n.ready);
        else cancelled.push(n.cancelled);
      }
      const payload = JSON.stringify({
        o: origin,
        ...(ready.length > 0 ? { t: ready } : {}),
        ...(cancelled.length > 0 ? { c: cancelled } : {}),
      } satisfies Wire);
      (store.pgPool as pg.Pool)
        .query('select pg_notify($1, $2)', [channel, payload])
        .catch((e: unknown) => log.warn({ err: e }, 'cannot notify other replicas of task notices'));
    }
  }

  /** A notification from another replica. */
  function received(payload: string): void {
    if (stopped) return;
    let wire: Wire;
    try {
      wire = JSON.parse(payload) as Wire;
    } catch {
      return;
    }
    if (typeof wire !== 'object' || wire === null || wire.o === origin) return;
    tell({
      o: wire.o,
      ...(Array.isArray(wire.t) ? { t: wire.t } : {}),
      ...(Array.isArray(wire.c) ? { c: wire.c } : {}),
    });
  }
  if (pgStore) deps.listener?.subscribe(channel, received);

  return {
    ready(task) {
      const t: ReadyTask = {
        id: task.id,
        mission_id: task.mission_id,
        domain_id: task.domain_id,
        assigned_agent_id: task.assigned_agent_id,
        required_capabilities: task.required_capabilities,
      };
      tell({ o: origin, t: [t] });
      queue({ ready: t });
    },
    cancelled(task) {
      const c: CancelledTask = { id: task.id, claimed_by: task.claimed_by };
      tell({ o: origin, c: [c] });
      queue({ cancelled: c });
    },
    async start() {},
    async stop() {
      stopped = true;
      if (outgoing.length > 0) flush();
    },
  };
}
