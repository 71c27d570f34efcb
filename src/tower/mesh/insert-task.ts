// A new task written inside a transaction: its mission (as `p` sees it), its row, its
// mesh_task_missions entry and its `created` event. SQLite's creation and every store's
// broadcast creation use it (PostgreSQL's one statement writes the same: postgres/create.ts).
import type { MeshTask } from '../../protocol/mesh.js';
import { canSeeDomain, type Principal } from '../auth/principal.js';
import type { Tx } from '../store/tx.js';
import { meshTaskEvent } from './event-codec.js';
import type { MeshTaskRow } from './migrations.js';
import { taskOf } from './task.js';

/** The mission's domain, or null when `p` sees no such mission. */
export async function missionDomain(tx: Tx, p: Principal, missionId: string): Promise<string | null> {
  const mission = await tx.db
    .selectFrom('missions')
    .select(['id', 'domain_id'])
    .where('id', '=', missionId)
    .executeTakeFirst();
  return mission && canSeeDomain(p, mission.domain_id) ? mission.domain_id : null;
}

/** Inserts `row` and its mission entry, and emits its `created` event. */
export async function insertTaskRow(tx: Tx, row: MeshTaskRow): Promise<MeshTask> {
  await tx.db.insertInto('mesh_tasks').values(row).execute();
  await tx.db.insertInto('mesh_task_missions').values({ mission_id: row.mission_id, id: row.id }).execute();
  const task = taskOf(row);
  tx.emit(meshTaskEvent(task, 'created'));
  return task;
}
