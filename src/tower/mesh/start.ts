// Starting a claimed task: claimed → running on the same lease. Starting a task that is
// running already changes nothing (a worker may retry its start).
import type { MeshTask } from '../../protocol/mesh.js';
import type { Principal } from '../auth/principal.js';
import { leasedTransition, leasedWrite } from './leased.js';
import type { MeshDeps } from './mesh-store.js';
import { LEASED } from './states.js';

export function startTask(
  deps: Pick<MeshDeps, 'write' | 'store'>,
  p: Principal,
  taskId: string,
  leaseId: string,
): Promise<MeshTask> {
  return leasedTransition(deps, 'start', p, taskId, leaseId, null, () =>
    leasedWrite(deps, p, taskId, leaseId, {
      from: LEASED,
      change: (row) => (row.state === 'running' ? null : { state: 'running' }),
      action: 'started',
    }),
  );
}
