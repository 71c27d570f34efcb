// Submitting a mesh task: one pending task, or for a broadcast a parent and one run per
// eligible agent enrolled now, each claimable only by its agent. Nodes that could claim
// what was created are told after the commit (hooks.onClaimable).
import { newId } from '../../lib/ids.js';
import { SvcError } from '../../protocol/errors.js';
import type { MeshTask, MeshTaskCreate } from '../../protocol/mesh.js';
import type { Principal } from '../auth/principal.js';
import { hasCapabilities } from './capabilities.js';
import { insertTaskRow, missionDomain } from './insert-task.js';
import type { MeshDeps, NewTaskRow } from './mesh-store.js';
import type { MeshTaskRow } from './migrations.js';
import { missionNotFound, taskOf } from './task.js';

export async function createTask(
  deps: Pick<MeshDeps, 'write' | 'store' | 'hooks'>,
  p: Principal,
  missionId: string,
  body: MeshTaskCreate,
): Promise<MeshTask> {
  const policy = body.claim_policy ?? 'first_claim';
  if (policy === 'assigned' && !body.assigned_agent_id) {
    throw new SvcError(
      'validation_failed',
      'body/assigned_agent_id: required when claim_policy is "assigned"',
      {
        errors: [{ field: 'body/assigned_agent_id', message: 'required when claim_policy is "assigned"' }],
      },
    );
  }
  if (policy !== 'assigned' && body.assigned_agent_id) {
    throw new SvcError('validation_failed', 'body/assigned_agent_id: only with claim_policy "assigned"', {
      errors: [{ field: 'body/assigned_agent_id', message: 'only with claim_policy "assigned"' }],
    });
  }
  const caps = body.required_capabilities ?? [];
  const rowOf = (nowMs: number, now: string): NewTaskRow => ({
    id: newId('mt', nowMs),
    mission_id: missionId,
    parent_id: null,
    title: body.title,
    description: body.description ?? '',
    claim_policy: policy,
    priority: body.priority ?? 0,
    assigned_agent_id: body.assigned_agent_id ?? null,
    required_capabilities: JSON.stringify(caps),
    state: 'pending',
    attempt: 1,
    max_attempts: body.max_attempts ?? 3,
    lease_seconds: body.lease_seconds ?? 60,
    lease_id: null,
    lease_expires_at: null,
    claimed_by: null,
    result: null,
    failure_reason: null,
    created_at: now,
    updated_at: now,
  });
  if (policy !== 'broadcast') {
    const task = taskOf(await deps.store.insertTask(p, missionId, rowOf));
    deps.hooks.onClaimable?.(task);
    return task;
  }
  const runs: MeshTask[] = [];
  const parent = await deps.write(async (tx) => {
    const domainId = await missionDomain(tx, p, missionId);
    if (domainId === null) throw missionNotFound(missionId);
    const base: MeshTaskRow = { ...rowOf(tx.nowMs, tx.now), domain_id: domainId };
    const parent = await insertTaskRow(tx, base);
    const agents = await tx.db
      .selectFrom('agents')
      .selectAll()
      .where('domain_id', '=', domainId)
      .orderBy('id')
      .execute();
    const eligible = agents.filter((a) => hasCapabilities(a, caps));
    // A broadcast without runs would stay pending forever: refuse it (nothing is written).
    if (eligible.length === 0) {
      throw new SvcError(
        'conflict',
        `no agent enrolled in domain ${domainId} has the required capabilities ${JSON.stringify(caps)}: a broadcast task needs at least one`,
      );
    }
    for (const a of eligible) {
      runs.push(
        await insertTaskRow(tx, {
          ...base,
          id: newId('mt', tx.nowMs),
          parent_id: base.id,
          claim_policy: 'assigned',
          assigned_agent_id: a.id,
        }),
      );
    }
    return parent;
  });
  for (const t of runs) deps.hooks.onClaimable?.(t);
  return parent;
}
