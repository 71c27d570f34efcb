// Which nodes to wake when a mesh task becomes claimable (docs/mesh.md, task_ready): as many
// as the task can take, not every node that could claim it. Pure: the task relay loads the
// candidates (agents of the task's domain whose node's channel is up on a live replica) and
// keeps the rotation's cursor; this decides. It must not read the store or send anything.

/**
 * Nodes a `first_claim` task wakes. One would do when the woken worker claims; the second is a
 * spare for one that cannot (every slot taken since it last said idle, or gone since its
 * presence was read), so the task does not wait for the next poll (30 s by default). Its cost
 * is one claim call that finds nothing, against one per capable node before.
 */
export const FIRST_CLAIM_WAKES = 2;

/** An enrolled agent whose node holds a channel on a live replica. */
export interface WakeCandidate {
  agentId: string;
  nodeId: string;
  /** agents.status: idle | online | busy | errored | offline (what its node last reported). */
  status: string;
  capabilities: readonly string[];
}

export interface WakeTask {
  /** Set for `assigned` tasks and broadcast runs: only this agent may claim it. */
  assigned_agent_id: string | null;
  required_capabilities: readonly string[];
}

/**
 * `nodes`: tell exactly these (none when every able agent is known but none can be woken).
 * `after`: the rotation's cursor for the next task of the domain (the last agent considered).
 * null: no candidate known; the relay falls back to telling every connected node that could
 * claim it (a presence or status write not landed yet must not cost a whole poll interval).
 */
export type WakeChoice = { nodes: string[]; after: string | null } | null;

/** Statuses that count as waiting for work (`online` is accepted from nodes; svcd sends idle). */
const IDLE = new Set(['idle', 'online']);
/** Statuses worth waking: a busy agent may have a free slot; errored and offline ones cannot claim. */
const WAKEABLE = new Set(['idle', 'online', 'busy']);

function able(c: WakeCandidate, required: readonly string[]): boolean {
  return WAKEABLE.has(c.status) && required.every((r) => c.capabilities.includes(r));
}

/**
 * The nodes to tell that `task` is ready. An assigned task (a broadcast run too) wakes its
 * agent's node. A first_claim task wakes up to `wakes` distinct nodes among the agents with
 * the required capabilities, idle ones first (busy ones only when none is idle), taken in
 * agent-id order starting after `after` and wrapping: over many tasks each candidate is woken
 * in turn, whichever replica chose.
 */
export function chooseWake(
  task: WakeTask,
  candidates: readonly WakeCandidate[],
  after: string | null,
  wakes = FIRST_CLAIM_WAKES,
): WakeChoice {
  if (task.assigned_agent_id !== null) {
    const a = candidates.find((c) => c.agentId === task.assigned_agent_id);
    if (!a || !WAKEABLE.has(a.status)) return null;
    return { nodes: [a.nodeId], after };
  }
  const capable = candidates.filter((c) => able(c, task.required_capabilities));
  if (capable.length === 0) return null;
  const idle = capable.filter((c) => IDLE.has(c.status));
  const pool = (idle.length > 0 ? idle : capable).sort((x, y) =>
    x.agentId < y.agentId ? -1 : x.agentId > y.agentId ? 1 : 0,
  );
  const first =
    after === null
      ? 0
      : Math.max(
          0,
          pool.findIndex((c) => c.agentId > after),
        );
  const nodes: string[] = [];
  let last = after;
  for (let i = 0; i < pool.length && nodes.length < wakes; i++) {
    const c = pool[(first + i) % pool.length] as WakeCandidate;
    last = c.agentId;
    if (!nodes.includes(c.nodeId)) nodes.push(c.nodeId);
  }
  return { nodes, after: last };
}
