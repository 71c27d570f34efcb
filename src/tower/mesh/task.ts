// A mesh task as the API shows it, read from its row, and the refusals every operation
// shares. Reads only: no operation's change lives here.
import { SvcError } from '../../protocol/errors.js';
import type { MeshState, MeshTask } from '../../protocol/mesh.js';
import { canSeeDomain, type Principal } from '../auth/principal.js';
import type { Db } from '../store/types.js';
import type { MeshTaskRow } from './migrations.js';

export function taskOf(r: MeshTaskRow): MeshTask {
  return {
    id: r.id,
    mission_id: r.mission_id,
    domain_id: r.domain_id,
    title: r.title,
    description: r.description,
    claim_policy: r.claim_policy as MeshTask['claim_policy'],
    priority: Number(r.priority),
    assigned_agent_id: r.assigned_agent_id,
    required_capabilities: JSON.parse(r.required_capabilities) as string[],
    state: r.state as MeshState,
    attempt: Number(r.attempt),
    max_attempts: Number(r.max_attempts),
    lease_seconds: Number(r.lease_seconds),
    claimed_by: r.claimed_by,
    result: r.result === null ? null : (JSON.parse(r.result) as unknown),
    failure_reason: r.failure_reason,
    parent_id: r.parent_id,
    created_at: r.created_at,
    updated_at: r.updated_at,
  };
}

/** The task's row, if `p` may see it (else not_found, exactly as if there were none). */
export async function loadTask(db: Db, p: Principal, taskId: string): Promise<MeshTaskRow> {
  const row = await db.selectFrom('mesh_tasks').selectAll().where('id', '=', taskId).executeTakeFirst();
  if (!row || !canSeeDomain(p, row.domain_id)) throw taskNotFound(taskId);
  return row;
}

/**
 * A lease belongs to the node of the agent that claimed it: a node reporting on a task one
 * of its own agents does not hold is refused (operators' credentials are not nodes).
 */
export async function checkLeaseOwner(db: Db, p: Principal, row: MeshTaskRow): Promise<void> {
  if (p.nodeId === undefined || row.claimed_by === null) return;
  const agent = await db
    .selectFrom('agents')
    .select('node_id')
    .where('id', '=', row.claimed_by)
    .executeTakeFirst();
  if (agent?.node_id !== p.nodeId) {
    throw new SvcError(
      'forbidden',
      `mesh task ${row.id} is leased to an agent of another node: only that node may report on it`,
    );
  }
}

export function taskNotFound(taskId: string): SvcError {
  return new SvcError('not_found', `mesh task ${taskId} not found`);
}

export function missionNotFound(missionId: string): SvcError {
  return new SvcError('not_found', `mission ${missionId} not found`);
}

/** An assigned task's agent is not one of the mission's domain: nobody could claim it. */
export function assignedAgentNotFound(agentId: string, domainId: string): SvcError {
  return new SvcError(
    'agent_not_found',
    `agent ${agentId} is not enrolled in domain ${domainId} (the mission's): an assigned task needs an agent that can claim it (see: svc agent list --domain ${domainId})`,
  );
}

export function agentNotFound(agentId: string): SvcError {
  return new SvcError(
    'agent_not_found',
    `agent ${agentId} is not enrolled here: run "svc daemon agent enroll"`,
  );
}

/** `state`: the task's state when the request was refused. */
export function staleLease(taskId: string, leaseId: string, state: string | null): SvcError {
  return new SvcError(
    'stale_lease',
    `lease ${leaseId} is not the current lease of mesh task ${taskId} (state ${state}): the task was reclaimed, cancelled or finished`,
  );
}
