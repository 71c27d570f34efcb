// A heartbeat: the lease holder extends its lease by the task's lease_seconds from now. No
// event (heartbeats are frequent and change nothing anyone follows).
import { iso } from '../../lib/clock.js';
import type { Principal } from '../auth/principal.js';
import { leasedWrite } from './leased.js';
import type { MeshDeps } from './mesh-store.js';
import { LEASED } from './states.js';

export async function heartbeatTask(
  deps: Pick<MeshDeps, 'write' | 'store'>,
  p: Principal,
  taskId: string,
  leaseId: string,
): Promise<{ lease_expires_at: string }> {
  let expires = '';
  await leasedWrite(deps, p, taskId, leaseId, {
    from: LEASED,
    change: (row, tx) => {
      expires = iso(tx.nowMs + Number(row.lease_seconds) * 1000);
      return { lease_expires_at: expires };
    },
    action: null,
  });
  return { lease_expires_at: expires };
}
