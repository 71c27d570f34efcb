// Broadcast parents: a broadcast task is a parent row whose runs (one per eligible agent) do
// the work; it ends when they all have. Settling it is part of the transaction in which a
// run ends (complete, fail, cancel, an expired lease), after that run's change.
import type { MeshTask } from '../../protocol/mesh.js';
import type { Tx } from '../store/tx.js';
import { meshTaskEvent } from './event-codec.js';
import type { MeshStore } from './mesh-store.js';
import { isTerminal, settledParentChange } from './states.js';
import { taskOf } from './task.js';

/** Ends `t`'s broadcast parent once every run has ended: completed if all completed. */
export async function settleParent(tx: Tx, store: Pick<MeshStore, 'lockParent'>, t: MeshTask): Promise<void> {
  if (!t.parent_id) return;
  await store.lockParent(tx, t.parent_id);
  const runs = await tx.db
    .selectFrom('mesh_tasks')
    .select('state')
    .where('parent_id', '=', t.parent_id)
    .execute();
  const set = settledParentChange(
    runs.map((r) => r.state),
    tx.now,
  );
  if (!set) return;
  const parent = await tx.db
    .selectFrom('mesh_tasks')
    .selectAll()
    .where('id', '=', t.parent_id)
    .executeTakeFirst();
  if (!parent || isTerminal(parent.state)) return;
  await tx.db.updateTable('mesh_tasks').set(set).where('id', '=', parent.id).execute();
  tx.emit(meshTaskEvent(taskOf({ ...parent, ...set }), set.state as string));
}
