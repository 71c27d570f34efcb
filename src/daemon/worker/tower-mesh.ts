// MeshWorkApi over the tower: the MCP tools of docs/mesh.md (POST /mcp/call with the node JWT),
// the mission record for its repository and permission policy (kept MISSION_TTL_MS: a claim
// storm must not turn into a GET per task, and a changed policy applies within that time),
// and mission artifacts.
import { type Clock, systemClock } from '../../lib/clock.js';
import type { MissionAgentPolicy } from '../../protocol/agent-policy.js';
import type { Claimed } from '../../protocol/mesh.js';
import type { TowerApi } from '../tower-client/api.js';
import type { Lease, MeshWorkApi, MissionSettings } from './mesh-api.js';

export const MISSION_TTL_MS = 30_000;

/** report_progress and fail_mesh_task take at most this much text. */
const MAX_TEXT = 10_000;

export function createTowerMesh(tower: TowerApi, clock: Clock = systemClock): MeshWorkApi {
  const mcp = <T>(tool: string, args: Record<string, unknown>) =>
    tower.request<{ result: T }>('POST', '/mcp/call', { tool, args }).then((r) => r.result);
  const missions = new Map<string, { at: number; settings: Promise<MissionSettings> }>();
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
    mission(domainId, missionId) {
      const cached = missions.get(missionId);
      if (cached && clock.now() - cached.at < MISSION_TTL_MS) return cached.settings;
      const settings = tower
        .request<{ repository?: string | null; agent_policy?: MissionAgentPolicy | null }>(
          'GET',
          `/domains/${encodeURIComponent(domainId)}/m/${encodeURIComponent(missionId)}`,
        )
        .then((m) => ({ repository: m.repository ?? null, agent_policy: m.agent_policy ?? null }));
      // A failed lookup is not kept: the next task asks again.
      settings.catch(() => missions.delete(missionId));
      missions.set(missionId, { at: clock.now(), settings });
      return settings;
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
