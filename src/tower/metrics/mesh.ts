// The mesh's metrics as this replica performs its operations: claim latency, lease expiries,
// reclaims and finished tasks. Counters sum across replicas (each counts what it did); the
// mesh sees only its hooks (mesh-store.ts MeshHooks, which these fit), never prom-client; and
// these do not import the mesh, which sits above http and so above this folder.
import { Counter, Histogram, type Registry } from 'prom-client';
import type { Claimed } from '../../protocol/mesh.js';

/** The mesh operations these metrics count: the metric half of mesh-store.ts MeshHooks. */
export interface MeshMetricHooks {
  onClaimed(claims: Claimed[], seconds: number): void;
  onLeasesExpired(counts: { requeued: number; failed: number }): void;
  onFinished(state: 'completed' | 'failed' | 'cancelled', n?: number): void;
}

export function meshMetrics(registry: Registry): MeshMetricHooks {
  const claimDuration = new Histogram({
    name: 'svc_mesh_claim_duration_seconds',
    help: 'Time a claim call took in the store, by whether it got a task (claimed) or none (empty)',
    labelNames: ['result'],
    buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5],
    registers: [registry],
  });
  const claimed = new Counter({
    name: 'svc_mesh_claims_total',
    help: 'Tasks claimed (a claim of several tasks counts each)',
    registers: [registry],
  });
  const reclaims = new Counter({
    name: 'svc_mesh_reclaims_total',
    help: 'Tasks claimed again on a later attempt (after their lease expired or a retry)',
    registers: [registry],
  });
  const expiries = new Counter({
    name: 'svc_mesh_lease_expiries_total',
    help: 'Leases that expired, by what the sweep did: requeued (back to pending) or failed (last attempt)',
    labelNames: ['outcome'],
    registers: [registry],
  });
  const finished = new Counter({
    name: 'svc_mesh_tasks_finished_total',
    help: 'Tasks that reached a final state (completed, failed, cancelled)',
    labelNames: ['state'],
    registers: [registry],
  });
  return {
    onClaimed(claims: Claimed[], seconds: number) {
      claimDuration.observe({ result: claims.length > 0 ? 'claimed' : 'empty' }, seconds);
      if (claims.length === 0) return;
      claimed.inc(claims.length);
      const again = claims.filter((c) => c.task.attempt > 1).length;
      if (again > 0) reclaims.inc(again);
    },
    onLeasesExpired({ requeued, failed }) {
      if (requeued > 0) expiries.inc({ outcome: 'requeued' }, requeued);
      if (failed > 0) {
        expiries.inc({ outcome: 'failed' }, failed);
        finished.inc({ state: 'failed' }, failed);
      }
    },
    onFinished(state, n = 1) {
      if (n > 0) finished.inc({ state }, n);
    },
  };
}
