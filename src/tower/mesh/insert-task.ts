// A new task written inside a transaction: the checks of its mission (as `p` sees it) and its
// assigned agent, its row, its mesh_task_missions entry and its `created` event. SQLite's and
// every broadcast creation use it (PostgreSQL's one statement does the same: postgres/create.ts).
import type { MeshTask } from '../../protocol/mesh.js';
import { canSeeDomain, type Principal } from '../auth/principal.js';
import type { Tx } from '../store/tx.js';
import { meshTaskEvent } from './event-codec.js';
import type { MeshTaskRow } from './migrations.js';
import { assignedAgentNotFound, taskOf } from './task.js';

/** The mission's domain, or null when `p` sees no such mission. */
export async function missionDomain(tx: Tx, p: Principal, missionId: string): Promise<string | null> {
  const mission = await tx.db
    .selectFrom('missions')
    .select(['id', 'domain_id'])
    .where('id', '=', missionId)
    .executeTakeFirst();
  return mission && canSeeDomain(p, mission.domain_id) ? mission.domain_id : null;
}

/**
 * An assigned task whose agent is not enrolled in the mission's domain would never be
 * claimed: refused (agent_not_found) before anything is written.
 */
export async function checkAssignedAgent(tx: Tx, agentId: string | null, domainId: string): Promise<void> {
  if (!agentId) return;
  const agent = await tx.db
    .selectFrom('agents')
    .select('id')
    .where('id', '=', agentId)
    .where('domain_id', '=', domainId)
    .executeTakeFirst();
  if (!agent) throw assignedAgentNotFound(agentId, domainId);
}

/** Inserts `row` and its mission entry, and emits its `created` event. */
export async function insertTaskRow(tx: Tx, row: MeshTaskRow): Promise<MeshTask> {
  await tx.db.insertInto('mesh_tasks').values(row).execute();
  await tx.db.insertInto('mesh_task_missions').values({ mission_id: row.mission_id, id: row.id }).execute();
  const task = taskOf(row);
  tx.emit(meshTaskEvent(task, 'created'));
  return task;
}
