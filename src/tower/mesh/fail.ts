// Failing a leased task: claimed or running → failed with the worker's reason. A retry
// (retry.ts) may reopen it.
import type { MeshTask } from '../../protocol/mesh.js';
import type { Principal } from '../auth/principal.js';
import { leasedTransition, leasedWrite } from './leased.js';
import type { MeshDeps } from './mesh-store.js';
import { LEASED } from './states.js';

export function failTask(
  deps: Pick<MeshDeps, 'write' | 'store'>,
  p: Principal,
  taskId: string,
  leaseId: string,
  reason: string,
): Promise<MeshTask> {
  return leasedTransition(deps, 'fail', p, taskId, leaseId, reason, () =>
    leasedWrite(deps, p, taskId, leaseId, {
      from: LEASED,
      change: () => ({ state: 'failed', failure_reason: reason, lease_id: null, lease_expires_at: null }),
      action: 'failed',
      extra: () => ({ reason }),
    }),
  );
}
