// The PostgreSQL hot path of the mesh queue: claim and the lease-holding transitions
// (start, complete, fail) each as ONE statement, so each is one round trip and one commit
// (an implicit transaction: no BEGIN/COMMIT, no row fetched to JavaScript and written back).
//
// A claim picks with `FOR UPDATE SKIP LOCKED` (a row another claimer holds is passed over,
// never waited for), updates the picked rows, and appends their `matrix` events, all in
// data-modifying CTEs of one statement, which commit or roll back together. Events are
// inserted unnumbered like every other write's; the sequencer numbers them after commit, so
// feed ordering is the same as for any transaction. The agent's authorization (domain, node)
// and capabilities are read in the same statement; its domain and capabilities are scalar
// subqueries so the scan of the pending index keeps its order and stops at LIMIT.
//
// Statements are named (prepared once per pooled connection). The SQLite store keeps the
// general transaction path in service.ts (one writer; its grouped commits are the fast path).
import { randomBytes } from 'node:crypto';
import { iso } from '../../lib/clock.js';
import type { Principal } from '../auth/principal.js';
import type { Write } from '../store/tx.js';
import type { MeshTaskRow } from './migrations.js';

/** The `matrix` event of each row a CTE named `changed` returned, as feed/event-log.ts writes it. */
function eventInsert(action: string, tsParam: string, extra = ''): string {
  return `insert into events (ts, type, domain_id, mission_id, agent_id, status, payload)
    select ${tsParam}, 'matrix', domain_id, mission_id, coalesce(claimed_by, assigned_agent_id), state,
      json_strip_nulls(json_build_object('entity', 'mesh_task', 'action', '${action}', 'id', id,
        'title', title, 'state', state, 'attempt', attempt, 'parent_id', parent_id${extra}))::text
    from changed order by id`;
}

/** ISO 8601 UTC text with milliseconds, exactly as lib/clock.ts iso() writes it. */
const isoSql = (msExpr: string) =>
  `to_char((timestamptz 'epoch' + (${msExpr}) * interval '1 millisecond') at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')`;

function claimText(withMission: boolean): string {
  // $1 agent, $2 visible domains (null: all), $3 node (null: any), $4 limit, $5 lease ids,
  // $6 now (ms), $7 now (ISO), $8 mission.
  return `with agent as (
      select id, domain_id, capabilities::jsonb as caps from agents
      where id = $1 and ($2::text[] is null or domain_id = any($2::text[]))
        and ($3::text is null or node_id = $3::text)
    ), picked as (
      select t.id from mesh_tasks t
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
      from numbered where t.id = numbered.id
      returning t.*
    ), ev as (${eventInsert('claimed', '$7')})
    select (select count(*) from agent)::int as agent_ok, c.*
    from (select 1) one left join changed c on true`;
}

const CLAIM = { any: claimText(false), mission: claimText(true) };

export type ClaimRow = { agent_ok: number } & (MeshTaskRow | { [K in keyof MeshTaskRow]: null });

export async function pgClaim(
  write: Write,
  p: Principal,
  agentId: string,
  missionId: string | undefined,
  limit: number,
  nowMs: number,
): Promise<ClaimRow[]> {
  const leases = Array.from({ length: limit }, () => `lease_${randomBytes(12).toString('hex')}`);
  const values: unknown[] = [agentId, p.domains, p.nodeId ?? null, limit, leases, nowMs, iso(nowMs)];
  if (missionId !== undefined) values.push(missionId);
  const rows = await write.statement<ClaimRow>(
    {
      name: missionId !== undefined ? 'mesh_claim_m' : 'mesh_claim',
      text: missionId !== undefined ? CLAIM.mission : CLAIM.any,
      values,
    },
    (rows) => rows.some((r) => r.id !== null),
  );
  return rows;
}

/** A lease-holding transition done in one statement. */
export interface LeasedChange {
  /** Statement name; one per distinct `set`. */
  name: string;
  action: string;
  /** SET clause; parameters from $5 on (values in `params`). */
  set: string;
  /** States the change applies to. */
  from: string[];
  params: unknown[];
  /** Extra `json_build_object` pairs for the event payload (leading comma). */
  extraPayload?: string;
}

export type LeasedRow = {
  cur_state: string | null;
  cur_domain: string | null;
  cur_parent: string | null;
  cur_lease: string | null;
} & (MeshTaskRow | { [K in keyof MeshTaskRow]: null });

const leasedTexts = new Map<string, string>();

/**
 * Applies `change` if `leaseId` is the task's current lease and its state is one of
 * `change.from`, appending the event; broadcast runs (parent_id set) are left alone so the
 * caller can settle their parent in a transaction. The `cur_*` columns are the row before (for
 * not_found / stale_lease), null when there is no such task.
 */
export async function pgLeased(
  write: Write,
  p: Principal,
  taskId: string,
  leaseId: string,
  nowMs: number,
  change: LeasedChange,
): Promise<LeasedRow | null> {
  let text = leasedTexts.get(change.name);
  if (!text) {
    // $1 task, $2 lease, $3 visible domains, $4 now (ISO), then change.params.
    const from = change.from.map((st) => `'${st}'`).join(', ');
    text = `with cur as (
        select state, domain_id, parent_id, lease_id from mesh_tasks where id = $1
      ), changed as (
        update mesh_tasks set ${change.set}, updated_at = $4
        where id = $1 and lease_id = $2 and state in (${from}) and parent_id is null
          and ($3::text[] is null or domain_id = any($3::text[]))
        returning *
      ), ev as (${eventInsert(change.action, '$4', change.extraPayload)})
      select cur.state as cur_state, cur.domain_id as cur_domain, cur.parent_id as cur_parent,
        cur.lease_id as cur_lease, c.*
      from cur left join changed c on true`;
    leasedTexts.set(change.name, text);
  }
  const rows = await write.statement<LeasedRow>(
    {
      name: change.name,
      text,
      values: [taskId, leaseId, p.domains, iso(nowMs), ...change.params],
    },
    (rows) => rows.some((r) => r.id !== null),
  );
  return rows[0] ?? null;
}
