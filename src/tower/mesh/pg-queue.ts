// The PostgreSQL hot path of the mesh queue: claim and the lease-holding transitions
// (start, complete, fail) each as ONE statement, so each is one round trip and one commit
// (an implicit transaction: no BEGIN/COMMIT, no row fetched to JavaScript and written back).
//
// A claim picks with `FOR UPDATE SKIP LOCKED` (a row another claimer holds is passed over,
// never waited for), updates the picked rows, and appends their `matrix` events, all in
// data-modifying CTEs of one statement, which commit or roll back together. Events get their
// ids at insert like every other write's and become readable below the sequencer's
// watermark, so feed ordering is the same as for any transaction. The agent's authorization (domain, node)
// and capabilities are read in the same statement; its domain and capabilities are scalar
// subqueries so the scan of the pending index keeps its order and stops at LIMIT.
//
// Statements are named (prepared once per connection of the hot pool, which plans them
// generically: store/open.ts HOT_POOL_MAX). The SQLite store keeps the
// general transaction path in service.ts (one writer; its grouped commits are the fast path).
import { randomBytes } from 'node:crypto';
import { iso } from '../../lib/clock.js';
import type { Claimed, MeshTask } from '../../protocol/mesh.js';
import type { Principal } from '../auth/principal.js';
import { EVENT_BLOCK_MAX } from '../feed/event-log.js';
import type { Write } from '../store/tx.js';
import type { MeshTaskRow } from './migrations.js';

/**
 * The `matrix` events of the rows a CTE named `changed` returned, as ONE block row of the
 * event log (feed/migrations.ts, version 12) in its compact mesh form (feed/event-log.ts
 * MeshBlock): `n` events with ids from the row's id on, the action once, and per task, in
 * task id order compared bytewise (ids are ASCII), `[domain_id, mission_id, agent_id,
 * state, id, title, attempt, parent_id]` and, with `extra`, an object of more payload
 * members. The reader expands each to the event the full form held. No row when nothing
 * changed. `extra`: an SQL text expression adding payload members, starting with a comma.
 *
 * The JSON is put together as text: json_build_object and json_build_array look up the type
 * of every argument on every call (11% of the PostgreSQL backends' CPU in a profile of the
 * queue drain; 6.9 against 3.2 µs per event built alone). Ids and states go in as they are:
 * ids are newId()'s (a lowercase prefix, `_`, Crockford base32) and states a fixed set,
 * nothing in them needs escaping; the title, the one free text, goes through to_json. The
 * compact form is about 150 bytes per task against 230 for each event written out whole,
 * with fewer concatenations: bench/queue ran 3-7% faster with it.
 */
function eventInsert(action: string, tsParam: string, extra = ''): string {
  const member = `'["' || domain_id || '","' || mission_id || '",'
      || coalesce('"' || coalesce(claimed_by, assigned_agent_id) || '"', 'null') || ',"' || state
      || '","' || id || '",' || to_json(title)::text || ',' || attempt || ','
      || coalesce('"' || parent_id || '"', 'null')${extra ? ` || ',{' || ltrim((${extra}), ',') || '}'` : ''} || ']'`;
  return `insert into events (ts, type, n, payload)
    select ${tsParam}, 'matrix', count(*),
      '{"mesh_task":"${action}","t":[' || string_agg(${member}, ',' order by id collate "C") || ']}'
    from changed having count(*) > 0`;
}

/** ISO 8601 UTC text with milliseconds, exactly as lib/clock.ts iso() writes it. */
const isoSql = (msExpr: string) =>
  `to_char((timestamptz 'epoch' + (${msExpr}) * interval '1 millisecond') at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')`;

function claimText(withMission: boolean): string {
  // $1 agent, $2 visible domains (null: all), $3 node (null: any), $4 limit, $5 lease ids,
  // $6 now (ms), $7 now (ISO), $8 mission.
  // `changed` finds the picked rows by their ctid (a TID scan of exactly those rows), so its
  // plan cannot depend on statistics: joined by id alone, the generic plan of a store whose
  // mesh_tasks had been analyzed read the whole table and hashed it (10 000 tasks: 3.0
  // against 1.0 ms for a claim of 100; the cost grew with every finished task kept). A
  // picked row another transaction changed after this statement's snapshot may be left
  // pending (its new version is not visible to the update): the next claim takes it. Each
  // updated row is one this statement picked and locked, so no task is claimed twice.
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
    ), ev as (${eventInsert('claimed', '$7')})
    select (select count(*) from agent)::int as agent_ok, ${CLAIM_COLS.map((col) => `c.${col}`).join(', ')}
    from (select 1) one left join changed c on true`;
}

/**
 * What a claim sends back of each task, in this order after `agent_ok`: its own data and its
 * lease. The rest of a claimed task the caller knows (state, claimed_by, updated_at) or does
 * not send (lease_expires_at); each column a row carries costs the tower ~0.25 µs to receive
 * and parse.
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

/** The claim statements (exported for EXPLAIN in benchmarks). */
export const CLAIM = { any: claimText(false), mission: claimText(true) };

/**
 * Claims up to `limit` tasks for `agentId` in one statement; null when the agent is not one
 * `p` may claim for (unknown, another domain, another node's). Each claim's task is built
 * from the row's values in CLAIM_COLS order (rows as arrays: no object per row).
 */
export async function pgClaim(
  write: Write,
  p: Principal,
  agentId: string,
  missionId: string | undefined,
  limit: number,
  nowMs: number,
): Promise<Claimed[] | null> {
  // A claim's events are one block (eventInsert).
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

/**
 * Creating a task (not a broadcast: its runs are several rows, on the general path): the
 * mission's check (it exists, in a domain `p` may see), the task row, its entry in
 * mesh_task_missions and its `created` event in one statement, as a claim is. On the general
 * path a creation is a transaction of six round trips (BEGIN to COMMIT) on the main pool.
 * $1 mission, $2 visible domains (null: all), $3 task id, $4 title, $5 description, $6 claim
 * policy, $7 priority, $8 assigned agent, $9 required capabilities (JSON text), $10 max
 * attempts, $11 lease seconds, $12 now (ISO).
 */
const CREATE = `with mission as (
    select id, domain_id,
      ($8::text is null or exists (
        select 1 from agents a where a.id = $8::text and a.domain_id = missions.domain_id
      )) as agent_enrolled
    from missions
    where id = $1 and ($2::text[] is null or domain_id = any($2::text[]))
  ), changed as (
    insert into mesh_tasks (id, mission_id, domain_id, parent_id, title, description, claim_policy,
      priority, assigned_agent_id, required_capabilities, state, attempt, max_attempts,
      lease_seconds, lease_id, lease_expires_at, claimed_by, result, failure_reason, created_at,
      updated_at)
    select $3, id, domain_id, null, $4, $5, $6, $7, $8, $9, 'pending', 1, $10, $11, null, null,
      null, null, null, $12, $12
    from mission
    where agent_enrolled
    returning *
  ), listed as (
    insert into mesh_task_missions (mission_id, id) select mission_id, id from changed
  ), ev as (${eventInsert('created', '$12')})
  select domain_id, agent_enrolled from mission`;

/**
 * Inserts `row` (a new pending task; its domain_id is taken from its mission) with its
 * mission entry and `created` event. Returns the mission's domain and whether the task was
 * written: not when it is assigned to an agent not enrolled in that domain. Null when `p`
 * sees no such mission (nothing written).
 */
export async function pgCreate(
  write: Write,
  p: Principal,
  row: Omit<MeshTaskRow, 'domain_id'>,
): Promise<{ domainId: string; agentEnrolled: boolean } | null> {
  const rows = await write.statement<{ domain_id: string; agent_enrolled: boolean }>(
    {
      name: 'mesh_create',
      text: CREATE,
      values: [
        row.mission_id,
        p.domains,
        row.id,
        row.title,
        row.description,
        row.claim_policy,
        row.priority,
        row.assigned_agent_id,
        row.required_capabilities,
        row.max_attempts,
        row.lease_seconds,
        row.created_at,
      ],
    },
    (rows) => rows[0]?.agent_enrolled === true,
  );
  const r = rows[0];
  return r ? { domainId: r.domain_id, agentEnrolled: r.agent_enrolled } : null;
}

/** A lease-holding transition done in one statement. */
export interface LeasedChange {
  /** Statement name; one per change. */
  name: string;
  action: string;
  /** SET clause; `req.arg` is the request's argument (text, e.g. the result JSON). */
  set: string;
  /** States the change applies to. */
  from: string[];
  /** SQL text expression: more members of the event payload, from the row (leading comma). */
  extraPayload?: string;
  /**
   * The changed task's row does not come back, only the rows of the requests the statement
   * left alone: for callers that answer with an acknowledgement (completeMany), each changed
   * request gets a LeasedAck (its id, and updated_at: the statement's time). Receiving and
   * parsing a task's 26 columns cost the tower ~8 of its ~30 µs of CPU per claimed and
   * completed task (bench/queue, svc-batch-100: 30.5 -> 22.5 µs, medians of 6 alternating
   * runs).
   */
  ack?: boolean;
}

/**
 * A request's row: the changed task (`id` set), or, when the statement left it alone (`id`
 * null), the task as it was (`cur_*`, null when there is no such task).
 */
interface LeasedOutcome {
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

/** Most requests one statement carries (its events are one block: at most EVENT_BLOCK_MAX). */
export const MAX_BATCH = Math.min(500, EVENT_BLOCK_MAX);
/** Statements of one kind under way at once (of the pool's connections). */
export const MAX_IN_FLIGHT = Number(process.env.SVC_MESH_IN_FLIGHT ?? 4);

/** The row before, sent only for the requests a statement left alone (the rest need none). */
const CUR = ['cur_state', 'cur_domain', 'cur_parent', 'cur_lease'];
const NO_CUR = { cur_state: null, cur_domain: null, cur_parent: null, cur_lease: null };

/** The statement of a lease-holding change (exported for tests of its plan). */
export function leasedText(change: LeasedChange, single = false): string {
  const from = change.from.map((st) => `'${st}'`).join(', ');
  // $1 task ids, $2 leases, $3 args, $4 visible domains (JSON array text, null: all), $5 now,
  // $6 requesting nodes.
  // An expired lease matches nothing here and is refused on the general path (fencing).
  // `cur` is each task as this statement's snapshot sees it, for the checks and for
  // not_found / stale_lease. Each task is looked up on its own through the primary key (a
  // LATERAL with LIMIT is never flattened into a join), and `changed` updates that version
  // by its ctid: the plan cannot depend on statistics. Planned as a join, a fresh store (no
  // statistics yet) got a sequential scan of mesh_tasks for `cur`, and `changed` read every
  // entry of mesh_tasks_leased (those of finished tasks too, until vacuum) to find its 100
  // rows: 11.8 against 2.5 ms for a batch of 100 midway through bench/queue.
  // The rows are not locked before the UPDATE (no FOR UPDATE in `cur`): each such lock is a
  // WAL record of its own, about 55 of the ~1 180 bytes a claimed and completed task wrote.
  // If another transaction changed a row after this statement's snapshot, the UPDATE waits
  // for it and then rechecks the row's newest version (EvalPlanQual): PostgreSQL rechecks
  // the TID condition, which the newest version, at another TID, fails, so the row is left
  // alone; the checks on `t` (the request's lease, a state the change applies to) hold the
  // same line where a TID recheck passes. A lease is unique and every way out of claimed
  // and running clears it; while it holds, its expiry only moves later and the domain and
  // parent never change, so `cur`'s checks of those stay true. A row left alone whose
  // snapshot showed the request's lease takes the general path (service.ts), which reads it
  // under a lock. Statements of one kind never share a task within a tower (LeasedBatcher);
  // if two statements that did (a start and a completion of the same tasks at once, or two
  // replicas') deadlock, the one PostgreSQL aborts sends each of its requests alone (send).
  // `single`: the same for one request, with scalar parameters (no unnest, sort or hash
  // joins). Lone requests are the common case with one task per call. Both forms are
  // planned generically (the hot pool, store/open.ts): left to choose, PostgreSQL planned
  // the array form afresh on every execution (its generic plan is costed for 100 array
  // elements), which took longer than executing it.
  // $6: the node each request comes from (null: not a node). A lease belongs to the node of
  // the agent that claimed it: a node's request for another node's lease is left alone here
  // and refused on the general path (service.ts), with one primary-key probe of agents per
  // request inside this statement, not another round trip.
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
    ), ev as (${eventInsert(change.action, '$5', change.extraPayload)})
    select req.ord, ${['state', 'domain_id', 'parent_id', 'lease_id']
      .map((col, i) =>
        change.ack ? `cur.${col} as ${CUR[i]}` : `case when c.id is null then cur.${col} end as ${CUR[i]}`,
      )
      .join(', ')}${change.ack ? ', null as id' : ', c.*'}
    from req left join cur on cur.id = req.id left join changed c on c.id = req.id
    ${change.ack ? 'where c.id is null' : ''}`;
}

interface Pending<R> {
  taskId: string;
  leaseId: string;
  arg: string | null;
  domains: string | null;
  node: string | null;
  resolve(row: R | null): void;
  reject(e: unknown): void;
}

/**
 * Lease-holding transitions of one kind, coalesced: a request arriving while a statement is
 * under way waits for it, then goes with every other waiting request in the next statement
 * (like the SQLite store's grouped commits). A lone request goes at once. Each request's
 * change and event are in that statement's transaction; each gets its own outcome (stale
 * lease, not found) from its own row.
 */
export class LeasedBatcher<R extends LeasedOutcome & { id: string | null } = LeasedRow> {
  private readonly queue: Pending<R>[] = [];
  private inFlight = 0;
  private readonly text: string;
  /** The statement for a lone request (scalar parameters, see leasedText). */
  private readonly single: string;

  constructor(
    private readonly write: Write,
    private readonly clock: { now(): number },
    private readonly change: LeasedChange,
  ) {
    this.text = leasedText(change);
    this.single = leasedText(change, true);
  }

  /**
   * Applies the change if `leaseId` is the task's current lease and its state is one of
   * `change.from`, appending the event; broadcast runs (parent_id set) are left alone so the
   * caller can settle their parent in a transaction. Null: no such task.
   */
  run(p: Principal, taskId: string, leaseId: string, arg: string | null): Promise<R | null> {
    return new Promise((resolve, reject) => {
      this.queue.push({
        taskId,
        leaseId,
        arg,
        domains: p.domains === null ? null : JSON.stringify(p.domains),
        node: p.nodeId ?? null,
        resolve,
        reject,
      });
      this.schedule();
    });
  }

  /**
   * `run` for several requests of one caller, with one promise for all of them (the rows in
   * request order): a batch of 100 made 100 promises and as many async frames before.
   */
  runMany(
    p: Principal,
    reqs: { taskId: string; leaseId: string; arg: string | null }[],
  ): Promise<(R | null)[]> {
    return new Promise((resolve, reject) => {
      const rows: (R | null)[] = new Array(reqs.length).fill(null);
      let left = reqs.length;
      if (left === 0) {
        resolve(rows);
        return;
      }
      let failed = false;
      const domains = p.domains === null ? null : JSON.stringify(p.domains);
      const node = p.nodeId ?? null;
      reqs.forEach((r, i) => {
        this.queue.push({
          taskId: r.taskId,
          leaseId: r.leaseId,
          arg: r.arg,
          domains,
          node,
          resolve: (row) => {
            rows[i] = row;
            if (--left === 0 && !failed) resolve(rows);
          },
          reject: (e) => {
            if (failed) return;
            failed = true;
            reject(e);
          },
        });
      });
      this.schedule();
    });
  }

  private scheduled = false;

  /**
   * Starts a drain after the current synchronous run of calls: requests made together (the
   * items of one completeMany, several callers in one tick) go in one statement. Started at
   * once, the first requests of a burst each went alone, one statement and one commit each
   * (4 of every 100 items of a completeMany, with MAX_IN_FLIGHT 4).
   */
  private schedule(): void {
    if (this.scheduled) return;
    this.scheduled = true;
    queueMicrotask(() => {
      this.scheduled = false;
      if (this.queue.length > 0 && this.inFlight < MAX_IN_FLIGHT) void this.drain();
    });
  }

  /** Tasks in a statement under way: a later request for one of them waits for it. */
  private readonly busyIds = new Set<string>();

  private async drain(): Promise<void> {
    this.inFlight++;
    try {
      while (this.queue.length > 0) {
        // One request per task in a statement: a second one for the same task waits for the
        // next, so it sees the first one's outcome (and gets stale_lease).
        // One pass over the queue: a splice per taken request moved the rest of the queue
        // each time (16 claimers' completions of 100 are 1 600 requests).
        const batch: Pending<R>[] = [];
        let kept = 0;
        for (const item of this.queue) {
          if (batch.length < MAX_BATCH && !this.busyIds.has(item.taskId)) {
            this.busyIds.add(item.taskId);
            batch.push(item);
          } else {
            this.queue[kept++] = item;
          }
        }
        this.queue.length = kept;
        if (batch.length === 0) break;
        try {
          await this.send(batch);
        } finally {
          for (const b of batch) this.busyIds.delete(b.taskId);
        }
      }
    } finally {
      // Requests left in the queue wait for a task in another statement: the drain that
      // sent it takes them when it is back (its loop runs until the queue is empty).
      this.inFlight--;
    }
  }

  private async send(batch: Pending<R>[]): Promise<void> {
    const nowMs = this.clock.now();
    let rows: R[];
    try {
      rows = await this.write.statement<R>(
        batch.length === 1
          ? {
              name: `${this.change.name}_1`,
              text: this.single,
              values: [
                batch[0]?.taskId,
                batch[0]?.leaseId,
                batch[0]?.arg,
                batch[0]?.domains,
                iso(nowMs),
                batch[0]?.node,
              ],
            }
          : {
              name: this.change.name,
              text: this.text,
              values: [
                batch.map((b) => b.taskId),
                batch.map((b) => b.leaseId),
                batch.map((b) => b.arg),
                batch.map((b) => b.domains),
                iso(nowMs),
                batch.map((b) => b.node),
              ],
            },
        // With `ack`, only the requests left alone come back: the rest changed.
        (rows) => (this.change.ack ? rows.length < batch.length : rows.some((r) => r.id !== null)),
      );
    } catch (e) {
      // A deadlock with another replica's batch (or any error) of a batch: each request alone,
      // so one request's failure is its own.
      if (batch.length > 1) {
        for (const b of batch) await this.send([b]);
        return;
      }
      for (const b of batch) b.reject(e);
      return;
    }
    const byOrd = new Map(rows.map((r) => [Number(r.ord), r]));
    const now = iso(nowMs);
    batch.forEach((b, i) => {
      const r = byOrd.get(i + 1);
      if (r === undefined && this.change.ack) {
        const ack: LeasedAck = { ord: String(i + 1), ...NO_CUR, id: b.taskId, updated_at: now };
        b.resolve(ack as unknown as R);
        return;
      }
      b.resolve(r && (r.id !== null || r.cur_state !== null) ? r : null);
    });
  }
}
