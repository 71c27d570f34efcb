// MeshWorkApi over the tower: the MCP tools of docs/mesh.md (POST /mcp/call with the node JWT)
// and the mission record for its repository (cached: a mission's repository rarely moves,
// and a claim storm must not turn into a GET per task).
import type { Claimed } from '../../protocol/mesh.js';
import type { TowerApi } from '../tower-client/api.js';
import type { Lease, MeshWorkApi } from './mesh-api.js';

/** report_progress and fail_mesh_task take at most this much text. */
const MAX_TEXT = 10_000;

export function createTowerMesh(tower: TowerApi): MeshWorkApi {
  const mcp = <T>(tool: string, args: Record<string, unknown>) =>
    tower.request<{ result: T }>('POST', '/mcp/call', { tool, args }).then((r) => r.result);
  const repositories = new Map<string, Promise<string | null>>();
  return {
    async claim(agentId): Promise<Lease | null> {
      return (await mcp<Claimed | null>('claim_mesh_task', { agent_id: agentId })) ?? null;
    },
    async start(taskId, leaseId) {
      await mcp('start_mesh_task', { task_id: taskId, lease_id: leaseId });
    },
    async heartbeat(taskId, leaseId) {
      await mcp('heartbeat_mesh_task', { task_id: taskId, lease_id: leaseId });
    },
    async progress(taskId, leaseId, p) {
      await mcp('report_progress', {
        task_id: taskId,
        lease_id: leaseId,
        ...p,
        message: p.message.slice(0, MAX_TEXT),
      });
    },
    async complete(taskId, leaseId, result) {
      await mcp('complete_mesh_task', { task_id: taskId, lease_id: leaseId, result });
    },
    async fail(taskId, leaseId, reason) {
      const r = reason.length > MAX_TEXT ? `${reason.slice(0, MAX_TEXT - 1)}…` : reason;
      await mcp('fail_mesh_task', { task_id: taskId, lease_id: leaseId, reason: r || 'failed' });
    },
    repository(domainId, missionId) {
      let p = repositories.get(missionId);
      if (!p) {
        p = tower
          .request<{ repository?: string | null }>(
            'GET',
            `/domains/${encodeURIComponent(domainId)}/m/${encodeURIComponent(missionId)}`,
          )
          .then((m) => m.repository ?? null);
        // A failed lookup is not cached: the next task asks again.
        p.catch(() => repositories.delete(missionId));
        repositories.set(missionId, p);
      }
      return p;
    },
  };
}
