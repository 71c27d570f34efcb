// Progress of a leased task: a `progress` event from the lease holder, the task unchanged.
import { SvcError } from '../../protocol/errors.js';
import type { Principal } from '../auth/principal.js';
import { checkNotExpired, holdsLease } from './lease.js';
import type { MeshDeps } from './mesh-store.js';
import { LEASED } from './states.js';
import { checkLeaseOwner, loadTask } from './task.js';

export interface ProgressUpdate {
  message: string;
  percent?: number;
  data?: Record<string, unknown>;
}

export async function reportProgress(
  deps: Pick<MeshDeps, 'write'>,
  p: Principal,
  taskId: string,
  leaseId: string,
  update: ProgressUpdate,
): Promise<void> {
  await deps.write(async (tx) => {
    const row = await loadTask(tx.db, p, taskId);
    if (!holdsLease(row, leaseId, LEASED)) {
      throw new SvcError('stale_lease', `lease ${leaseId} is not the current lease of mesh task ${taskId}`);
    }
    await checkLeaseOwner(tx.db, p, row);
    checkNotExpired(row, tx.now);
    tx.emit({
      type: 'progress',
      domain_id: row.domain_id,
      mission_id: row.mission_id,
      agent_id: row.claimed_by,
      status: row.state,
      payload: {
        task_id: taskId,
        kind: 'progress',
        text: update.message,
        ...(update.percent !== undefined ? { percent: update.percent } : {}),
        ...(update.data ? { data: update.data } : {}),
      },
    });
  });
}
