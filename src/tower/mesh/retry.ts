// Retrying a failed task: failed → pending with attempt + 1. A broadcast task's retry
// retries its failed runs (its completed ones stand); a run's retry reopens its failed
// parent, which settles again when the runs end. Runs of a cancelled broadcast stay ended.
import { SvcError } from '../../protocol/errors.js';
import type { MeshTask } from '../../protocol/mesh.js';
import type { Principal } from '../auth/principal.js';
import type { Tx } from '../store/tx.js';
import { meshTaskEvent } from './event-codec.js';
import type { MeshDeps } from './mesh-store.js';
import type { MeshTaskRow } from './migrations.js';
import { reopenChange, requeueChange } from './states.js';
import { loadTask, taskOf } from './task.js';

export async function retryTask(
  deps: Pick<MeshDeps, 'write' | 'store' | 'hooks'>,
  p: Principal,
  taskId: string,
): Promise<MeshTask> {
  const claimable: MeshTask[] = [];
  const task = await deps.write(async (tx) => {
    claimable.length = 0;
    const row = await loadTask(tx.db, p, taskId);
    if (row.state !== 'failed') {
      throw new SvcError(
        'illegal_transition',
        `mesh task ${taskId} is ${row.state}: only a failed task can be retried`,
      );
    }
    if (row.claim_policy === 'broadcast') {
      await deps.store.lockParent(tx, row.id);
      const runs = await tx.db
        .selectFrom('mesh_tasks')
        .selectAll()
        .where('parent_id', '=', taskId)
        .where('state', '=', 'failed')
        .orderBy('id')
        .execute();
      if (runs.length === 0) {
        throw new SvcError(
          'illegal_transition',
          `broadcast task ${taskId} has no failed run to retry (the runs that did not complete were cancelled): submit it again`,
        );
      }
      for (const r of runs) claimable.push(await requeue(tx, r));
      return requeue(tx, row);
    }
    if (row.parent_id) {
      await deps.store.lockParent(tx, row.parent_id);
      const parent = await tx.db
        .selectFrom('mesh_tasks')
        .selectAll()
        .where('id', '=', row.parent_id)
        .executeTakeFirst();
      if (parent?.state === 'cancelled') {
        throw new SvcError(
          'illegal_transition',
          `mesh task ${taskId} is a run of broadcast task ${parent.id}, which is cancelled`,
        );
      }
      if (parent?.state === 'failed') {
        const set = reopenChange(tx.now);
        await tx.db.updateTable('mesh_tasks').set(set).where('id', '=', parent.id).execute();
        tx.emit(meshTaskEvent(taskOf({ ...parent, ...set }), 'reopened'));
      }
    }
    const t = await requeue(tx, row);
    claimable.push(t);
    return t;
  });
  for (const t of claimable) deps.hooks.onClaimable?.(t);
  return task;
}

/** A failed task back to pending for its next attempt, with its `retried` event. */
async function requeue(tx: Tx, row: MeshTaskRow): Promise<MeshTask> {
  const set = requeueChange(row, tx.now);
  const res = await tx.db
    .updateTable('mesh_tasks')
    .set(set)
    .where('id', '=', row.id)
    .where('state', '=', 'failed')
    .executeTakeFirst();
  if (Number(res.numUpdatedRows) !== 1)
    throw new SvcError('illegal_transition', `mesh task ${row.id} changed meanwhile`);
  const t = taskOf({ ...row, ...set });
  tx.emit(meshTaskEvent(t, 'retried'));
  return t;
}
