// The lease-holding transitions (start, heartbeat, complete, fail): the store's one-statement
// path first where it has one, else (and for what that path leaves alone) the general
// transaction, a compare-and-set on the task's lease and state with its event.

import { SvcError } from '../../protocol/errors.js';
import type { MeshState, MeshTask } from '../../protocol/mesh.js';
import type { Principal } from '../auth/principal.js';
import type { Tx } from '../store/tx.js';
import { settleParent } from './broadcast.js';
import { meshTaskEvent } from './event-codec.js';
import { checkNotExpired, holdsLease } from './lease.js';
import type { LeasedKind, MeshDeps } from './mesh-store.js';
import type { MeshTaskRow } from './migrations.js';
import { isTerminal } from './states.js';
import { checkLeaseOwner, loadTask, staleLease, taskOf } from './task.js';

/** `kind` in one statement where the store can; `general` decides the rest. */
export async function leasedTransition(
  deps: Pick<MeshDeps, 'store'>,
  kind: LeasedKind,
  p: Principal,
  taskId: string,
  leaseId: string,
  arg: string | null,
  general: () => Promise<MeshTask>,
): Promise<MeshTask> {
  const r = await deps.store.leased(kind, p, taskId, leaseId, arg);
  if ('done' in r) return r.done;
  if ('refused' in r) throw r.refused;
  return general();
}

/** How a lease-holding transition changes the task in the general transaction. */
export interface LeasedWrite {
  /** States it applies to. */
  from: readonly MeshState[];
  /** The columns it sets (updated_at aside); null: nothing to change. */
  change(row: MeshTaskRow, tx: Tx): Partial<MeshTaskRow> | null;
  /** The event's action; null: no event (a heartbeat). */
  action: string | null;
  /** More payload members of the event. */
  extra?(row: MeshTaskRow): Record<string, unknown>;
}

/** A lease-holding transition in a transaction: compare-and-set on the lease, then the new state. */
export function leasedWrite(
  deps: Pick<MeshDeps, 'write' | 'store'>,
  p: Principal,
  taskId: string,
  leaseId: string,
  w: LeasedWrite,
): Promise<MeshTask> {
  return deps.write(async (tx) => {
    const row = await loadTask(tx.db, p, taskId);
    if (!holdsLease(row, leaseId, w.from)) throw staleLease(taskId, leaseId, row.state);
    await checkLeaseOwner(tx.db, p, row);
    checkNotExpired(row, tx.now);
    if (row.parent_id) await deps.store.lockParent(tx, row.parent_id);
    const set = w.change(row, tx);
    if (set === null) return taskOf(row);
    const res = await tx.db
      .updateTable('mesh_tasks')
      .set({ ...set, updated_at: tx.now })
      .where('id', '=', taskId)
      .where('lease_id', '=', leaseId)
      .where('state', '=', row.state)
      .executeTakeFirst();
    if (Number(res.numUpdatedRows) !== 1) {
      throw new SvcError(
        'stale_lease',
        `mesh task ${taskId} changed meanwhile: lease ${leaseId} is no longer current`,
      );
    }
    const t = taskOf({ ...row, ...set, updated_at: tx.now } as MeshTaskRow);
    if (w.action !== null) tx.emit(meshTaskEvent(t, w.action, w.extra?.(row)));
    if (isTerminal(t.state)) await settleParent(tx, deps.store, t);
    return t;
  });
}
