// Reading mesh tasks: one by id, and a mission's tasks a page at a time. No writes.
import type { MeshState, MeshTask } from '../../protocol/mesh.js';
import { canSeeDomain, type Principal } from '../auth/principal.js';
import type { MeshDeps } from './mesh-store.js';
import { loadTask, missionNotFound, taskOf } from './task.js';

export async function getTask(deps: Pick<MeshDeps, 'db'>, p: Principal, taskId: string): Promise<MeshTask> {
  return taskOf(await loadTask(deps.db, p, taskId));
}

/** Up to `limit + 1` tasks of the mission after `after` in id order (the extra one: a next page). */
export async function listTasks(
  deps: Pick<MeshDeps, 'db'>,
  p: Principal,
  missionId: string,
  q: { state?: MeshState; limit: number; after: string | null },
): Promise<MeshTask[]> {
  const mission = await deps.db
    .selectFrom('missions')
    .select(['id', 'domain_id'])
    .where('id', '=', missionId)
    .executeTakeFirst();
  if (!mission || !canSeeDomain(p, mission.domain_id)) throw missionNotFound(missionId);
  // Through mesh_task_missions (migration 22): the mission's task ids in order, each task
  // by its primary key.
  let sel = deps.db
    .selectFrom('mesh_task_missions as m')
    .innerJoin('mesh_tasks as t', 't.id', 'm.id')
    .selectAll('t')
    .where('m.mission_id', '=', missionId)
    .orderBy('m.id')
    .limit(q.limit + 1);
  if (q.state) sel = sel.where('t.state', '=', q.state);
  if (q.after !== null) sel = sel.where('m.id', '>', q.after);
  return (await sel.execute()).map(taskOf);
}
