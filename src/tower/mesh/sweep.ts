// The lease sweep: tasks whose lease expired go back to pending for their next attempt, or
// fail once they used their last one (states.ts expiredLeaseChange). Up to 500 a sweep,
// oldest expiry first; nodes that could claim a returned task are told after the commit.
import { sql } from 'kysely';
import type { MeshTask } from '../../protocol/mesh.js';
import { settleParent } from './broadcast.js';
import { meshTaskEvent } from './event-codec.js';
import type { MeshDeps } from './mesh-store.js';
import type { MeshTaskRow } from './migrations.js';
import { expiredLeaseChange } from './states.js';
import { taskOf } from './task.js';

const SWEEP_MAX = 500;

/** Returns how many tasks were swept. */
export async function sweepLeases(deps: Pick<MeshDeps, 'write' | 'store' | 'hooks'>): Promise<number> {
  const requeued: MeshTask[] = [];
  let failed = 0;
  const n = await deps.write(async (tx) => {
    const expired = await tx.db
      .selectFrom('mesh_tasks')
      .selectAll()
      .where(sql<boolean>`state in ('claimed', 'running')`) // partial index mesh_tasks_leased
      .where('lease_expires_at', '<', tx.now)
      .orderBy('lease_expires_at')
      .limit(SWEEP_MAX)
      .execute();
    let count = 0;
    failed = 0;
    for (const row of expired) {
      if (row.parent_id) await deps.store.lockParent(tx, row.parent_id);
      const { exhausted, set } = expiredLeaseChange(row, tx.now);
      const res = await tx.db
        .updateTable('mesh_tasks')
        .set(set)
        .where('id', '=', row.id)
        .where('lease_id', '=', row.lease_id)
        .where('state', '=', row.state)
        .executeTakeFirst();
      if (Number(res.numUpdatedRows) !== 1) continue;
      const t = taskOf({ ...row, ...set } as MeshTaskRow);
      tx.emit(
        meshTaskEvent(
          t,
          exhausted ? 'failed' : 'lease_expired',
          exhausted ? { reason: t.failure_reason } : {},
        ),
      );
      if (exhausted) {
        await settleParent(tx, deps.store, t);
        failed++;
      } else requeued.push(t);
      count++;
    }
    return count;
  });
  for (const t of requeued) deps.hooks.onClaimable?.(t);
  if (n > 0) deps.hooks.onLeasesExpired?.({ requeued: requeued.length, failed });
  return n;
}
