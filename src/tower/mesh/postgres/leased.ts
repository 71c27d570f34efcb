// PostgreSQL: the lease-holding transitions (start, complete, fail) as ONE statement each,
// for one request or a batch of them (postgres/batcher.ts). What a statement cannot decide
// alone it leaves alone, and the general transaction (leased.ts) settles it under a lock.

import { meshBlockInsert } from '../event-codec.js';
import type { MeshTaskRow } from '../migrations.js';

/** A lease-holding transition done in one statement. */
export interface LeasedChange {
  /** Statement name; one per change. */
  name: string;
  action: string;
  /** SET clause; `req.arg` is the request's argument (text, e.g. the result JSON). */
  set: string;
  /** States the change applies to. */
  from: string[];
  /** More payload members of the event: name → column of the changed row. */
  extra?: Record<string, string>;
  /**
   * Answered with an acknowledgement (completeTasks: its caller holds the tasks): only the
   * rows of the requests the statement left alone come back, so the changed tasks' columns
   * are neither sent nor parsed.
   */
  ack?: boolean;
}

export const START: LeasedChange = {
  name: 'mesh_start',
  action: 'started',
  from: ['claimed'],
  set: "state = 'running'",
};
export const COMPLETE: LeasedChange = {
  name: 'mesh_complete',
  action: 'completed',
  from: ['claimed', 'running'],
  set: "state = 'completed', result = req.arg, lease_id = null, lease_expires_at = null",
};
export const COMPLETE_ACK: LeasedChange = { ...COMPLETE, name: 'mesh_complete_ack', ack: true };
export const FAIL: LeasedChange = {
  name: 'mesh_fail',
  action: 'failed',
  from: ['claimed', 'running'],
  set: "state = 'failed', failure_reason = req.arg, lease_id = null, lease_expires_at = null",
  extra: { reason: 'failure_reason' },
};
/** Every lease-holding change (exported for tests of their plans). */
export const LEASED_CHANGES = [START, COMPLETE, COMPLETE_ACK, FAIL];

/**
 * A request's row: the changed task (`id` set), or, when the statement left it alone (`id`
 * null), the task as it was (`cur_*`, null when there is no such task).
 */
export interface LeasedOutcome {
  ord: string;
  cur_state: string | null;
  cur_domain: string | null;
  cur_parent: string | null;
  cur_lease: string | null;
}

export type LeasedRow = LeasedOutcome & (MeshTaskRow | { [K in keyof MeshTaskRow]: null });

/** A request's outcome from a change with `ack` set: changed (`id` set) or left alone. */
export type LeasedAck = LeasedOutcome &
  ({ id: string; updated_at: string } | { id: null; updated_at?: undefined });

/** The row before, sent only for the requests a statement left alone (the rest need none). */
const CUR = ['cur_state', 'cur_domain', 'cur_parent', 'cur_lease'];

/**
 * The statement of a lease-holding change; `single`: the same for one request with scalar
 * parameters (no unnest, sort or hash joins: lone requests are the common case with one task
 * per call).
 *
 * $1 task ids, $2 leases, $3 args, $4 visible domains (JSON array text, null: all), $5 now,
 * $6 requesting nodes (null: not a node).
 *
 * `cur` is each task as this statement's snapshot sees it, for the checks and for not_found
 * and stale_lease. Each task is looked up on its own by primary key (a LATERAL with LIMIT is
 * never flattened into a join) and `changed` updates that version by its ctid, so the plan
 * cannot depend on statistics. The rows are not locked first (a row lock is a WAL record of
 * its own per task). If another transaction changed a row after the snapshot, the UPDATE
 * waits for it and rechecks the newest version (EvalPlanQual): that version is at another
 * TID, so the row is left alone; where a TID recheck passes, the checks on `t` (the
 * request's lease, a state the change applies to) hold the same line. A lease is unique and
 * every way out of claimed and running clears it; while it holds, its expiry only moves
 * later and the domain and parent never change, so `cur`'s checks of those stay true.
 *
 * Left alone, for the general path to decide: an expired lease (fencing), another node's
 * lease (one primary-key probe of agents per request here, not another round trip), a
 * broadcast run (its parent may settle), a task changed meanwhile, a start of a running task.
 */
export function leasedText(change: LeasedChange, single = false): string {
  const from = change.from.map((st) => `'${st}'`).join(', ');
  const reqs = single
    ? 'select $1::text as id, $2::text as lease, $3::text as arg, $4::text as doms, $6::text as node, 1::bigint as ord'
    : `select * from unnest($1::text[], $2::text[], $3::text[], $4::text[], $6::text[])
        with ordinality as r(id, lease, arg, doms, node, ord)`;
  return `with req as (
      ${reqs}
    ), cur as (
      select t.tid, t.id, t.state, t.domain_id, t.parent_id, t.lease_id, t.lease_expires_at, t.claimed_by
      from (select distinct id from req order by id) u
      cross join lateral (
        select ctid as tid, id, state, domain_id, parent_id, lease_id, lease_expires_at, claimed_by
        from mesh_tasks where id = u.id limit 1
      ) t
    ), changed as (
      update mesh_tasks t set ${change.set}, updated_at = $5
      from req join cur on cur.id = req.id
      where t.ctid = cur.tid and t.lease_id = req.lease and t.state in (${from})
        and cur.lease_id = req.lease and cur.state in (${from})
        and cur.parent_id is null and cur.lease_expires_at > $5
        and (req.doms is null or req.doms::jsonb ? cur.domain_id)
        and (req.node is null
          or exists (select 1 from agents a where a.id = cur.claimed_by and a.node_id = req.node))
      returning t.*
    ), ev as (${meshBlockInsert(change.action, '$5', change.extra)})
    select req.ord, ${['state', 'domain_id', 'parent_id', 'lease_id']
      .map((col, i) =>
        change.ack ? `cur.${col} as ${CUR[i]}` : `case when c.id is null then cur.${col} end as ${CUR[i]}`,
      )
      .join(', ')}${change.ack ? ', null as id' : ', c.*'}
    from req left join cur on cur.id = req.id left join changed c on c.id = req.id
    ${change.ack ? 'where c.id is null' : ''}`;
}
