// Claiming: the best pending tasks an agent may take (highest priority, then oldest;
// assigned tasks only by their agent; every required capability among the agent's), each
// with its own lease. The store does it as one write (SQLite) or one statement (PostgreSQL).
import type { Claimed } from '../../protocol/mesh.js';
import type { Principal } from '../auth/principal.js';
import type { MeshDeps } from './mesh-store.js';
import { agentNotFound } from './task.js';

/** Up to `max` tasks for `agentId`, best first; empty when none is claimable. */
export async function claimTasks(
  deps: Pick<MeshDeps, 'store'>,
  p: Principal,
  agentId: string,
  missionId: string | undefined,
  max: number,
): Promise<Claimed[]> {
  const claims = await deps.store.claim(p, agentId, missionId, max);
  if (claims === null) throw agentNotFound(agentId);
  return claims;
}
