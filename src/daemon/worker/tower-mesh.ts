// MeshWorkApi over the tower: the MCP tools of docs/mesh.md (POST /mcp/call with the node JWT)
// and mission artifacts. The mission's repository and permission policy come with the start
// answer (start_mesh_task), so a run uses the policy as it is when the run starts.
import { SvcError } from '../../protocol/errors.js';
import type { Claimed, StartedTask } from '../../protocol/mesh.js';
import type { TowerApi } from '../tower-client/api.js';
import type { Lease, MeshWorkApi, TaskStanding } from './mesh-api.js';

/** report_progress and fail_mesh_task take at most this much text. */
const MAX_TEXT = 10_000;

export function createTowerMesh(tower: TowerApi): MeshWorkApi {
  const mcp = <T>(tool: string, args: Record<string, unknown>) =>
    tower.request<{ result: T }>('POST', '/mcp/call', { tool, args }).then((r) => r.result);
  return {
    async claim(agentId): Promise<Lease | null> {
      return (await mcp<Claimed | null>('claim_mesh_task', { agent_id: agentId })) ?? null;
    },
    async start(taskId, leaseId) {
      const t = await mcp<StartedTask>('start_mesh_task', { task_id: taskId, lease_id: leaseId });
      // A tower older than svcd answers the task alone: running without the mission's policy
      // would quietly drop its rules, so the run does not go ahead (tower and svcd ship together).
      if (!t?.mission) {
        throw new SvcError(
          'unavailable',
          'the tower sent no mission settings with the start: upgrade the tower',
        );
      }
      return t.mission;
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
    async state(taskId) {
      const t = await mcp<TaskStanding>('get_mesh_task', { task_id: taskId });
      return { state: t.state, attempt: t.attempt, claimed_by: t.claimed_by };
    },
    artifact(domainId, missionId, a) {
      return tower.request<{ id: string }>(
        'POST',
        `/domains/${encodeURIComponent(domainId)}/m/${encodeURIComponent(missionId)}/artifacts`,
        a,
      );
    },
  };
}
