// SQLite: a claim as one write. The store has one writer, so a compare-and-set on each
// picked task's state is all a claim needs to take each task once.
import { randomBytes } from 'node:crypto';
import { sql } from 'kysely';
import { iso } from '../../../lib/clock.js';
import type { Claimed } from '../../../protocol/mesh.js';
import { canSeeDomain, type Principal } from '../../auth/principal.js';
import type { Write } from '../../store/tx.js';
import { hasCapabilities } from '../capabilities.js';
import { meshTaskEvent } from '../event-codec.js';
import { taskOf } from '../task.js';

/**
 * Pending tasks read beyond `max`, in claim order, for those the agent's capabilities rule
 * out (they are checked here, not in SQL).
 */
const CLAIM_SCAN = 100;

export function sqliteClaim(
  write: Write,
  p: Principal,
  agentId: string,
  missionId: string | undefined,
  max: number,
): Promise<Claimed[] | null> {
  return write(async (tx) => {
    const agent = await tx.db.selectFrom('agents').selectAll().where('id', '=', agentId).executeTakeFirst();
    if (
      !agent ||
      !canSeeDomain(p, agent.domain_id) ||
      (p.nodeId !== undefined && agent.node_id !== p.nodeId)
    ) {
      return null;
    }
    let sel = tx.db
      .selectFrom('mesh_tasks')
      .selectAll()
      .where('domain_id', '=', agent.domain_id)
      // A literal, so SQLite's planner can prove the partial index mesh_tasks_pending applies.
      .where(sql<boolean>`state = 'pending'`)
      .where((eb) => eb.or([eb('claim_policy', '=', 'first_claim'), eb('assigned_agent_id', '=', agentId)]))
      .orderBy('priority', 'desc')
      .orderBy('id')
      .limit(CLAIM_SCAN + max);
    if (missionId) sel = sel.where('mission_id', '=', missionId);
    const claims: Claimed[] = [];
    for (const row of await sel.execute()) {
      if (claims.length >= max) break;
      if (!hasCapabilities(agent, JSON.parse(row.required_capabilities) as string[])) continue;
      const leaseId = `lease_${randomBytes(12).toString('hex')}`;
      const expires = iso(tx.nowMs + Number(row.lease_seconds) * 1000);
      const res = await tx.db
        .updateTable('mesh_tasks')
        .set({
          state: 'claimed',
          lease_id: leaseId,
          lease_expires_at: expires,
          claimed_by: agentId,
          updated_at: tx.now,
        })
        .where('id', '=', row.id)
        .where('state', '=', 'pending')
        .executeTakeFirst();
      if (Number(res.numUpdatedRows) !== 1) continue;
      const task = taskOf({ ...row, state: 'claimed', claimed_by: agentId, updated_at: tx.now });
      tx.emit(meshTaskEvent(task, 'claimed'));
      claims.push({ task, lease_id: leaseId, lease_seconds: Number(row.lease_seconds) });
    }
    return claims;
  });
}
