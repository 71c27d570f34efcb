// PostgreSQL: a claim as ONE statement (one round trip, one commit): data-modifying CTEs read
// the agent (the authorization check), pick the best pending rows with FOR UPDATE SKIP LOCKED
// (passed over, never waited for), set their state and leases, and append their events.
import { randomBytes } from 'node:crypto';
import { iso } from '../../../lib/clock.js';
import type { Claimed, MeshTask } from '../../../protocol/mesh.js';
import type { Principal } from '../../auth/principal.js';
import { EVENT_BLOCK_MAX } from '../../store/event-blocks.js';
import type { Write } from '../../store/tx.js';
import { meshBlockInsert } from '../event-codec.js';
import { isoSql } from './sql.js';

function claimText(withMission: boolean): string {
  // $1 agent, $2 visible domains (null: all), $3 node (null: any), $4 limit, $5 lease ids,
  // $6 now (ms), $7 now (ISO), $8 mission.
  // The agent's domain and capabilities are scalar subqueries, so the scan of the pending
  // index keeps its order and stops at LIMIT. `changed` finds the picked rows by their ctid
  // (a TID scan), so its plan cannot depend on statistics: joined by id, the generic plan of
  // an analyzed store read the whole table. A picked row another transaction changed after
  // this statement's snapshot may be left pending (its new version is not visible to the
  // update): the next claim takes it. Each updated row is one this statement picked and
  // locked, so no task is claimed twice.
  return `with agent as (
      select id, domain_id, capabilities::jsonb as caps from agents
      where id = $1 and ($2::text[] is null or domain_id = any($2::text[]))
        and ($3::text is null or node_id = $3::text)
    ), picked as (
      select t.ctid as tid, t.id from mesh_tasks t
      where t.domain_id = (select domain_id from agent) and t.state = 'pending'
        and (t.claim_policy = 'first_claim' or t.assigned_agent_id = $1)
        ${withMission ? 'and t.mission_id = $8' : ''}
        and (t.required_capabilities = '[]' or t.required_capabilities::jsonb <@ (select caps from agent))
      order by t.priority desc, t.id
      limit $4
      for update of t skip locked
    ), numbered as (
      select id, row_number() over (order by id) as n from picked
    ), changed as (
      update mesh_tasks t set state = 'claimed', lease_id = ($5::text[])[numbered.n],
        lease_expires_at = ${isoSql('$6::bigint + t.lease_seconds::bigint * 1000')},
        claimed_by = $1, updated_at = $7
      from numbered where t.ctid = any((select array_agg(tid) from picked)::tid[]) and t.id = numbered.id
      returning t.*
    ), ev as (${meshBlockInsert('claimed', '$7')})
    select (select count(*) from agent)::int as agent_ok, ${CLAIM_COLS.map((col) => `c.${col}`).join(', ')}
    from (select 1) one left join changed c on true`;
}

/**
 * What a claim sends back of each task, in this order after `agent_ok`: its own data and its
 * lease. The rest of a claimed task the caller knows (state, claimed_by, updated_at) or does
 * not send (lease_expires_at): every column a row carries costs the tower CPU to receive.
 */
const CLAIM_COLS = [
  'id',
  'mission_id',
  'domain_id',
  'parent_id',
  'title',
  'description',
  'claim_policy',
  'priority',
  'assigned_agent_id',
  'required_capabilities',
  'attempt',
  'max_attempts',
  'lease_seconds',
  'lease_id',
  'result',
  'failure_reason',
  'created_at',
] as const;
/** Where each CLAIM_COLS column is in a claim's row (agent_ok is at 0). */
const AT = Object.fromEntries(CLAIM_COLS.map((col, i) => [col, i + 1])) as Record<
  (typeof CLAIM_COLS)[number],
  number
>;

/** The claim statements (exported for tests of their plans and for EXPLAIN in benchmarks). */
export const CLAIM = { any: claimText(false), mission: claimText(true) };

/**
 * Claims up to `limit` tasks for `agentId` in one statement; null when the agent is not one
 * `p` may claim for (unknown, another domain, another node's). Rows come as arrays (no object
 * per row), each task built from its values in CLAIM_COLS order.
 */
export async function pgClaim(
  write: Write,
  p: Principal,
  agentId: string,
  missionId: string | undefined,
  limit: number,
  nowMs: number,
): Promise<Claimed[] | null> {
  // A claim's events are one block.
  if (limit > EVENT_BLOCK_MAX) throw new RangeError(`a claim takes at most ${EVENT_BLOCK_MAX} tasks`);
  // One draw for the batch: 12 random bytes per lease.
  const hex = randomBytes(12 * limit).toString('hex');
  const leases = Array.from({ length: limit }, (_, i) => `lease_${hex.slice(i * 24, i * 24 + 24)}`);
  const now = iso(nowMs);
  const values: unknown[] = [agentId, p.domains, p.nodeId ?? null, limit, leases, nowMs, now];
  if (missionId !== undefined) values.push(missionId);
  const rows = await write.statement<unknown[]>(
    {
      name: missionId !== undefined ? 'mesh_claim_m' : 'mesh_claim',
      text: missionId !== undefined ? CLAIM.mission : CLAIM.any,
      values,
      rowMode: 'array',
    },
    (rows) => rows.some((r) => r[AT.id] !== null),
  );
  if (!rows[0] || rows[0][0] === 0) return null;
  const claims: Claimed[] = [];
  for (const r of rows) {
    if (r[AT.id] === null) continue;
    const caps = r[AT.required_capabilities] as string;
    const result = r[AT.result] as string | null;
    claims.push({
      task: {
        id: r[AT.id] as string,
        mission_id: r[AT.mission_id] as string,
        domain_id: r[AT.domain_id] as string,
        title: r[AT.title] as string,
        description: r[AT.description] as string,
        claim_policy: r[AT.claim_policy] as MeshTask['claim_policy'],
        priority: r[AT.priority] as number,
        assigned_agent_id: r[AT.assigned_agent_id] as string | null,
        required_capabilities: caps === '[]' ? [] : (JSON.parse(caps) as string[]),
        state: 'claimed',
        attempt: r[AT.attempt] as number,
        max_attempts: r[AT.max_attempts] as number,
        lease_seconds: r[AT.lease_seconds] as number,
        claimed_by: agentId,
        result: result === null ? null : (JSON.parse(result) as unknown),
        failure_reason: r[AT.failure_reason] as string | null,
        parent_id: r[AT.parent_id] as string | null,
        created_at: r[AT.created_at] as string,
        updated_at: now,
      },
      lease_id: r[AT.lease_id] as string,
      lease_seconds: r[AT.lease_seconds] as number,
    });
  }
  return claims;
}
