// Cancelling a task that has not ended (pending, claimed or running), and with a broadcast
// task its runs that have not ended. Nodes holding a cancelled task are told after the
// commit (hooks.onCancelled).
import { SvcError } from '../../protocol/errors.js';
import type { MeshTask } from '../../protocol/mesh.js';
import type { Principal } from '../auth/principal.js';
import { settleParent } from './broadcast.js';
import { meshTaskEvent } from './event-codec.js';
import type { MeshDeps } from './mesh-store.js';
import { CANCELLABLE, cancelChange, isTerminal } from './states.js';
import { loadTask, taskOf } from './task.js';

export async function cancelTask(
  deps: Pick<MeshDeps, 'write' | 'store' | 'hooks'>,
  p: Principal,
  taskId: string,
): Promise<MeshTask> {
  // Tasks an agent held (claimed or running) when cancelled: its node is told to stop them.
  const held: MeshTask[] = [];
  const task = await deps.write(async (tx) => {
    held.length = 0;
    const row = await loadTask(tx.db, p, taskId);
    if (row.parent_id) await deps.store.lockParent(tx, row.parent_id);
    if (isTerminal(row.state)) {
      throw new SvcError('illegal_transition', `mesh task ${taskId} is already ${row.state}`);
    }
    const set = cancelChange(tx.now);
    const res = await tx.db
      .updateTable('mesh_tasks')
      .set(set)
      .where('id', '=', taskId)
      .where('state', '=', row.state)
      .executeTakeFirst();
    if (Number(res.numUpdatedRows) !== 1)
      throw new SvcError('illegal_transition', `mesh task ${taskId} changed meanwhile`);
    const t = taskOf({ ...row, ...set });
    tx.emit(meshTaskEvent(t, 'cancelled'));
    if (row.state !== 'pending') held.push(t);
    const runs = await tx.db
      .selectFrom('mesh_tasks')
      .selectAll()
      .where('parent_id', '=', taskId)
      .where('state', 'in', [...CANCELLABLE])
      .execute();
    for (const r of runs) {
      await tx.db.updateTable('mesh_tasks').set(set).where('id', '=', r.id).execute();
      const run = taskOf({ ...r, ...set });
      tx.emit(meshTaskEvent(run, 'cancelled'));
      if (r.state !== 'pending') held.push(run);
    }
    await settleParent(tx, deps.store, t);
    return t;
  });
  for (const t of held) deps.hooks.onCancelled?.(t);
  return task;
}
