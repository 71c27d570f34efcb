// PostgreSQL: a new task (not a broadcast) as ONE statement, like a claim: the checks of the
// mission and of an assigned agent, the task row, its mission entry and its `created` event
// (insert-task.ts writes the same rows in a transaction of several round trips).
import type { Principal } from '../../auth/principal.js';
import type { Write } from '../../store/tx.js';
import { meshBlockInsert } from '../event-codec.js';
import type { MeshTaskRow } from '../migrations.js';

/**
 * $1 mission, $2 visible domains (null: all), $3 task id, $4 title, $5 description, $6 claim
 * policy, $7 priority, $8 assigned agent, $9 required capabilities (JSON text), $10 max
 * attempts, $11 lease seconds, $12 now (ISO).
 */
const CREATE = `with mission as (
    select id, domain_id,
      ($8::text is null or exists (
        select 1 from agents a where a.id = $8::text and a.domain_id = missions.domain_id
      )) as agent_enrolled
    from missions
    where id = $1 and ($2::text[] is null or domain_id = any($2::text[]))
  ), changed as (
    insert into mesh_tasks (id, mission_id, domain_id, parent_id, title, description, claim_policy,
      priority, assigned_agent_id, required_capabilities, state, attempt, max_attempts,
      lease_seconds, lease_id, lease_expires_at, claimed_by, result, failure_reason, created_at,
      updated_at)
    select $3, id, domain_id, null, $4, $5, $6, $7, $8, $9, 'pending', 1, $10, $11, null, null,
      null, null, null, $12, $12
    from mission
    where agent_enrolled
    returning *
  ), listed as (
    insert into mesh_task_missions (mission_id, id) select mission_id, id from changed
  ), ev as (${meshBlockInsert('created', '$12')})
  select domain_id, agent_enrolled from mission`;

/**
 * Inserts `row` (a new pending task; its domain_id is taken from its mission) with its
 * mission entry and `created` event. Returns the mission's domain and whether the task was
 * written: not when it is assigned to an agent not enrolled in that domain. Null when `p`
 * sees no such mission (nothing written).
 */
export async function pgCreate(
  write: Write,
  p: Principal,
  row: Omit<MeshTaskRow, 'domain_id'>,
): Promise<{ domainId: string; agentEnrolled: boolean } | null> {
  const rows = await write.statement<{ domain_id: string; agent_enrolled: boolean }>(
    {
      name: 'mesh_create',
      text: CREATE,
      values: [
        row.mission_id,
        p.domains,
        row.id,
        row.title,
        row.description,
        row.claim_policy,
        row.priority,
        row.assigned_agent_id,
        row.required_capabilities,
        row.max_attempts,
        row.lease_seconds,
        row.created_at,
      ],
    },
    (rows) => rows[0]?.agent_enrolled === true,
  );
  const r = rows[0];
  return r ? { domainId: r.domain_id, agentEnrolled: r.agent_enrolled } : null;
}
