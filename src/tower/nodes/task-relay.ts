// Notices to nodes (docs/mesh.md, docs/agents.md): `task_ready` when a mesh task becomes
// claimable (new, retried, lease expired), to as many of the nodes that could claim it as it
// can take (wake.ts decides which); `task_cancelled` when a claimed or running task is
// cancelled, to the node of the agent holding it; `approval_decided` when an approval a node's
// subagent waits for is decided, to that node.
//
// A node's channel is held by one replica, and the change may be made on another. The
// replica that made the change chooses the nodes to wake once for the whole fleet (from agent
// status and presence in the store) and, on PostgreSQL, after its commit NOTIFYs the notices
// with the chosen node ids on a per-schema channel (one notification per batch of notices,
// outside the write's transaction: notifying transactions serialize their commits); every
// replica LISTENs and tells the chosen nodes it holds. The maker tells its own nodes itself
// and ignores its own notification. A lost notification (the LISTEN connection was down) or
// a woken node that does not claim only delays things: workers also poll, a cancelled
// task's lease is gone (its worker's next heartbeat, progress or completion gets stale_lease
// and the worker stops it), and a node waiting on an approval polls it too.
import { randomBytes } from 'node:crypto';
import type pg from 'pg';
import type { Clock } from '../../lib/clock.js';
import type { Logger } from '../../lib/log.js';
import type { MeshTask } from '../../protocol/mesh.js';
import type { Store } from '../store/open.js';
import type { PgListener } from '../store/pg-listen.js';
import type { Db } from '../store/types.js';
import type { ControlHub } from './control-hub.js';
import { replicaFresh } from './presence.js';
import { chooseWake, type WakeCandidate } from './wake.js';

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

/** A ready task and the nodes chosen to hear of it (absent: not chosen, see wake.ts). */
interface ReadyNotice extends ReadyTask {
  n?: string[];
}

/** A claimed or running task that was cancelled, and the agent that held it. */
export interface CancelledTask {
  id: string;
  claimed_by: string;
}

/** An approval asked for by a node, now decided. */
export interface DecidedApproval {
  node_id: string;
  approval_id: string;
  status: 'approved' | 'rejected';
  reason: string | null;
}

/** Channel of node notices between replicas sharing a schema. */
export function taskReadyChannel(schema: string | null): string {
  return schema ? `svc_task_ready_${schema}` : 'svc_task_ready';
}

/** NOTIFY payloads are limited to 8000 bytes: notices per notification. */
const PER_NOTIFY = 20;

interface Wire {
  /** Replica that made the change. */
  o: string;
  /** Ready tasks. */
  t?: ReadyNotice[];
  /** Cancelled tasks. */
  c?: CancelledTask[];
  /** Decided approvals: the node and the approval id (a reason may be long: the replica
   * holding the node reads the decision from the store). */
  a?: { n: string; a: string }[];
}

type Notice = { ready: ReadyNotice } | { cancelled: CancelledTask } | { decided: { n: string; a: string } };

export interface TaskRelay {
  /** A task became claimable on this replica (after its commit). */
  ready(task: ReadyTask): void;
  /** A claimed or running task was cancelled on this replica (after its commit). */
  cancelled(task: CancelledTask): void;
  /** An approval a node asked for was decided on this replica (after its commit). */
  approvalDecided(d: DecidedApproval): void;
  start(): Promise<void>;
  /** Sends what is queued (choices under way included), then stops. */
  stop(): Promise<void>;
}

export function createTaskRelay(deps: {
  store: Store;
  nodes: ControlHub;
  clock: Clock;
  log: Logger;
  /** PostgreSQL: the replica's LISTEN connection, on which other replicas' notices arrive. */
  listener?: PgListener | null;
}): TaskRelay {
  const { store, nodes, clock } = deps;
  const log = deps.log.child({ component: 'task-relay' });
  const origin = randomBytes(8).toString('hex');
  const channel = taskReadyChannel(store.schema);
  const pgStore = store.dialect === 'postgres' && store.pgPool !== null;
  let stopped = false;
  /** Ready tasks waiting for their choice (one choice per tick: a broadcast, a sweep). */
  let choosing: ReadyTask[] = [];
  let chosen: Promise<void> = Promise.resolve();
  let outgoing: Notice[] = [];
  /** Per domain, the last agent the rotation considered (wake.ts). */
  const cursors = new Map<string, string | null>();

  /** Agents of the domain that may be woken, with their node's channel up on a live replica. */
  async function candidates(domainId: string): Promise<WakeCandidate[]> {
    const rows = await store.db
      .selectFrom('agents')
      .leftJoin('node_channels', 'node_channels.node_id', 'agents.node_id')
      .leftJoin('tower_replicas', 'tower_replicas.id', 'node_channels.replica_id')
      .select([
        'agents.id as agent_id',
        'agents.node_id as node_id',
        'agents.status as status',
        'agents.capabilities as capabilities',
        'tower_replicas.renewed_at as renewed_at',
      ])
      .where('agents.domain_id', '=', domainId)
      .where('agents.status', 'in', ['idle', 'online', 'busy'])
      .execute();
    const now = clock.now();
    const out: WakeCandidate[] = [];
    for (const r of rows) {
      // A channel here is known for sure; another replica's counts while that replica lives.
      const present = nodes.isOnline(r.node_id) || (r.renewed_at !== null && replicaFresh(r.renewed_at, now));
      if (!present) continue;
      out.push({
        agentId: r.agent_id,
        nodeId: r.node_id,
        status: r.status,
        capabilities: JSON.parse(r.capabilities) as string[],
      });
    }
    return out;
  }

  /** The nodes to wake for each task, chosen here once for every replica. */
  async function choose(tasks: ReadyTask[]): Promise<ReadyNotice[]> {
    const out: ReadyNotice[] = [];
    const domains = new Map<string, ReadyTask[]>();
    for (const t of tasks) {
      const list = domains.get(t.domain_id);
      if (list) list.push(t);
      else domains.set(t.domain_id, [t]);
    }
    for (const [domainId, list] of domains) {
      let cs: WakeCandidate[] | null = null;
      try {
        cs = await candidates(domainId);
      } catch (e) {
        log.warn(
          { err: e, domain: domainId },
          'cannot read wake candidates; telling every node that could claim',
        );
      }
      for (const t of list) {
        const choice = cs === null ? null : chooseWake(t, cs, cursors.get(domainId) ?? null);
        if (choice) cursors.set(domainId, choice.after);
        out.push(choice ? { ...t, n: choice.nodes } : t);
      }
    }
    return out;
  }

  /** Tells the nodes connected here that were chosen (or, unchosen, could claim these tasks). */
  async function tellReady(tasks: ReadyNotice[]): Promise<void> {
    const here = nodes.connectedNodes();
    if (here.length === 0) return;
    for (const task of tasks) {
      const to = task.n ?? (await nodesForTask(store.db, task, here));
      for (const id of to) {
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

  /** Tells the nodes connected here the decisions of the approvals they wait on. */
  async function tellDecided(list: { n: string; a: string }[]): Promise<void> {
    for (const d of list) {
      if (!nodes.isOnline(d.n)) continue;
      const a = await store.db
        .selectFrom('approvals')
        .select(['status', 'reason'])
        .where('id', '=', d.a)
        .executeTakeFirst();
      if (a?.status !== 'approved' && a?.status !== 'rejected') continue;
      nodes.send(d.n, { type: 'approval_decided', approval_id: d.a, status: a.status, reason: a.reason });
    }
  }

  function tell(wire: Wire): void {
    if (wire.t?.length)
      tellReady(wire.t).catch((e: unknown) => log.warn({ err: e }, 'cannot send task_ready'));
    if (wire.c?.length) {
      tellCancelled(wire.c).catch((e: unknown) => log.warn({ err: e }, 'cannot send task_cancelled'));
    }
    if (wire.a?.length) {
      tellDecided(wire.a).catch((e: unknown) => log.warn({ err: e }, 'cannot send approval_decided'));
    }
  }

  function queue(n: Notice): void {
    if (!pgStore) return;
    // Notices of the same tick (a broadcast, a sweep) share notifications.
    if (outgoing.length === 0) setImmediate(flush);
    outgoing.push(n);
  }

  function flush(): void {
    const notices = outgoing;
    outgoing = [];
    for (let i = 0; i < notices.length; i += PER_NOTIFY) {
      const t: ReadyNotice[] = [];
      const c: CancelledTask[] = [];
      const a: { n: string; a: string }[] = [];
      for (const n of notices.slice(i, i + PER_NOTIFY)) {
        if ('ready' in n) t.push(n.ready);
        else if ('cancelled' in n) c.push(n.cancelled);
        else a.push(n.decided);
      }
      const wire: Wire = {
        o: origin,
        ...(t.length > 0 ? { t } : {}),
        ...(c.length > 0 ? { c } : {}),
        ...(a.length > 0 ? { a } : {}),
      };
      (store.pgPool as pg.Pool)
        .query('select pg_notify($1, $2)', [channel, JSON.stringify(wire)])
        .catch((e: unknown) => log.warn({ err: e }, 'cannot notify other replicas of node notices'));
    }
  }

  /** Chooses for what arrived this tick, tells the nodes here, and queues the notification. */
  function chooseSoon(): void {
    const tasks = choosing;
    choosing = [];
    chosen = chosen
      .then(async () => {
        const notices = await choose(tasks);
        tell({ o: origin, t: notices });
        for (const n of notices) queue({ ready: n });
      })
      .catch((e: unknown) => log.warn({ err: e }, 'cannot send task_ready'));
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
      ...(Array.isArray(wire.a) ? { a: wire.a } : {}),
    });
  }
  if (pgStore) deps.listener?.subscribe(channel, received);

  return {
    ready(task) {
      if (stopped) return;
      if (choosing.length === 0) setImmediate(chooseSoon);
      choosing.push({
        id: task.id,
        mission_id: task.mission_id,
        domain_id: task.domain_id,
        assigned_agent_id: task.assigned_agent_id,
        required_capabilities: task.required_capabilities,
      });
    },
    cancelled(task) {
      const c: CancelledTask = { id: task.id, claimed_by: task.claimed_by };
      tell({ o: origin, c: [c] });
      if (!stopped) queue({ cancelled: c });
    },
    approvalDecided(d) {
      // Held here: told now. Otherwise the replica that holds the node's channel tells it.
      const sent = nodes.send(d.node_id, {
        type: 'approval_decided',
        approval_id: d.approval_id,
        status: d.status,
        reason: d.reason,
      });
      if (!sent && !stopped) queue({ decided: { n: d.node_id, a: d.approval_id } });
    },
    async start() {},
    async stop() {
      if (stopped) return;
      stopped = true;
      if (choosing.length > 0) chooseSoon();
      await chosen;
      if (outgoing.length > 0) flush();
    },
  };
}
