// Starting a claimed task: claimed → running on the same lease. Starting a task that is
// running already changes nothing (a worker may retry its start). The answer carries what the
// run needs of its mission (repository, permission policy), read at the start: a node never
// asks for the mission itself, and a changed policy applies from the next start on.
import type { MissionAgentPolicy } from '../../protocol/agent-policy.js';
import type { MissionRunSettings, StartedTask } from '../../protocol/mesh.js';
import type { Principal } from '../auth/principal.js';
import type { Db } from '../store/types.js';
import { leasedTransition, leasedWrite } from './leased.js';
import type { MeshDeps } from './mesh-store.js';
import { LEASED } from './states.js';

export async function startTask(
  deps: Pick<MeshDeps, 'write' | 'store' | 'db'>,
  p: Principal,
  taskId: string,
  leaseId: string,
): Promise<StartedTask> {
  const task = await leasedTransition(deps, 'start', p, taskId, leaseId, null, () =>
    leasedWrite(deps, p, taskId, leaseId, {
      from: LEASED,
      change: (row) => (row.state === 'running' ? null : { state: 'running' }),
      action: 'started',
    }),
  );
  return { ...task, mission: await missionRunSettings(deps.db, task.mission_id) };
}

/** The mission's repository and policy; none once the mission is gone (its tasks go with it). */
export async function missionRunSettings(db: Db, missionId: string): Promise<MissionRunSettings> {
  const m = await db
    .selectFrom('missions')
    .select(['repository', 'agent_policy'])
    .where('id', '=', missionId)
    .executeTakeFirst();
  return {
    repository: m?.repository ?? null,
    agent_policy: m?.agent_policy ? (JSON.parse(m.agent_policy) as MissionAgentPolicy) : null,
  };
}
