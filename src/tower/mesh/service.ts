// Mesh task transitions (docs/mesh.md), shared by the REST routes and /mcp/call.
// Every transition is one write with its `matrix` event. State checks are part of each
// UPDATE (compare-and-set on state and lease), so two replicas racing on one task cannot both
// win: on PostgreSQL the loser's UPDATE re-reads the committed row and matches nothing.
import { randomBytes } from 'node:crypto';
import { sql } from 'kysely';
import { iso } from '../../lib/clock.js';
import { newId } from '../../lib/ids.js';
import { SvcError } from '../../protocol/errors.js';
import type { Claimed, MeshState, MeshTask, MeshTaskCreate } from '../../protocol/mesh.js';
import { canSeeDomain, type Principal } from '../auth/principal.js';
import type { TowerContext } from '../context.js';
import type { Tx } from '../store/tx.js';
import type { AgentRow, MeshTaskRow } from './migrations.js';
import {
  type LeasedAck,
  LeasedBatcher,
  type LeasedChange,
  type LeasedRow,
  pgClaim,
  pgCreate,
} from './pg-queue.js';

const TERMINAL: string[] = ['completed', 'failed', 'cancelled'];
const CLAIM_SCAN = 100;

export function taskOf(r: MeshTaskRow): MeshTask {
  return {
    id: r.id,
    mission_id: r.mission_id,
    domain_id: r.domain_id,
    title: r.title,
    description: r.description,
    claim_policy: r.claim_policy as MeshTask['claim_policy'],
    priority: Number(r.priority),
    assigned_agent_id: r.assigned_agent_id,
    required_capabilities: JSON.parse(r.required_capabilities) as string[],
    state: r.state as MeshState,
    attempt: Number(r.attempt),
    max_attempts: Number(r.max_attempts),
    lease_seconds: Number(r.lease_seconds),
    claimed_by: r.claimed_by,
    result: r.result === null ? null : (JSON.parse(r.result) as unknown),
    failure_reason: r.failure_reason,
    parent_id: r.parent_id,
    created_at: r.created_at,
    updated_at: r.updated_at,
  };
}

function transitionEvent(tx: Tx, t: MeshTask, action: string, extra: Record<string, unknown> = {}): void {
  tx.emit({
    type: 'matrix',
    domain_id: t.domain_id,
    mission_id: t.mission_id,
    agent_id: t.claimed_by ?? t.assigned_agent_id,
    status: t.state,
    payload: {
      entity: 'mesh_task',
      action,
      id: t.id,
      title: t.title,
      state: t.state,
      attempt: t.attempt,
      ...(t.parent_id ? { parent_id: t.parent_id } : {}),
      ...extra,
    },
  });
}

/** One item of completeMany: an acknowledgement (the caller holds the task already), or why not. */
export type CompleteOutcome =
  | { task_id: string; ok: true; updated_at: string }
  | { task_id: string; ok: false; code: string; detail: string };

export interface MeshHooks {
  /** A task became claimable (new, retried, lease expired): tell nodes that could take it. */
  onClaimable?(task: MeshTask): void;
  /** A task was cancelled while claimed or running: tell the node running it. */
  onCancelled?(task: MeshTask): void;
}

export class MeshService {
  /** PostgreSQL: coalesced one-statement lease transitions (pg-queue.ts). */
  private readonly batchers: Map<string, LeasedBatcher> | null;
  /** PostgreSQL: completeMany's completions, answered with an acknowledgement (COMPLETE_ACK). */
  private readonly acks: LeasedBatcher<LeasedAck> | null;

  constructor(
    private readonly ctx: TowerContext,
    private readonly hooks: MeshHooks = {},
  ) {
    this.batchers =
      ctx.store.dialect === 'postgres'
        ? new Map([START, COMPLETE, FAIL].map((c) => [c.name, new LeasedBatcher(ctx.write, ctx.clock, c)]))
        : null;
    this.acks =
      ctx.store.dialect === 'postgres'
        ? new LeasedBatcher<LeasedAck>(ctx.write, ctx.clock, COMPLETE_ACK)
        : null;
  }

  private async load(db: Tx['db'], p: Principal, taskId: string): Promise<MeshTaskRow> {
    const row = await db.selectFrom('mesh_tasks').selectAll().where('id', '=', taskId).executeTakeFirst();
    if (!row || !canSeeDomain(p, row.domain_id))
      throw new SvcError('not_found', `mesh task ${taskId} not found`);
    return row;
  }

  /**
   * A lease belongs to the node of the agent that claimed it: a node reporting on a task one
   * of its own agents does not hold is refused (operators' credentials are not nodes).
   */
  private async checkLeaseOwner(db: Tx['db'], p: Principal, row: MeshTaskRow): Promise<void> {
    if (p.nodeId === undefined || row.claimed_by === null) return;
    const agent = await db
      .selectFrom('agents')
      .select('node_id')
      .where('id', '=', row.claimed_by)
      .executeTakeFirst();
    if (agent?.node_id !== p.nodeId) {
      throw new SvcError(
        'forbidden',
        `mesh task ${row.id} is leased to an agent of another node: only that node may report on it`,
      );
    }
  }

  async get(p: Principal, taskId: string): Promise<MeshTask> {
    return taskOf(await this.load(this.ctx.store.db as unknown as Tx['db'], p, taskId));
  }

  async list(p: Principal, missionId: string, q: { state?: MeshState; limit: number; after: string | null }) {
    const mission = await this.ctx.store.db
      .selectFrom('missions')
      .select(['id', 'domain_id'])
      .where('id', '=', missionId)
      .executeTakeFirst();
    if (!mission || !canSeeDomain(p, mission.domain_id)) {
      throw new SvcError('not_found', `mission ${missionId} not found`);
    }
    // Through mesh_task_missions (migration 22): the mission's task ids in order, each task
    // by its primary key.
    let sel = this.ctx.store.db
      .selectFrom('mesh_task_missions as m')
      .innerJoin('mesh_tasks as t', 't.id', 'm.id')
      .selectAll('t')
      .where('m.mission_id', '=', missionId)
      .orderBy('m.id')
      .limit(q.limit + 1);
    if (q.state) sel = sel.where('t.state', '=', q.state);
    if (q.after !== null) sel = sel.where('m.id', '>', q.after);
    return (await sel.execute()).map(taskOf);
  }

  async create(p: Principal, missionId: string, body: MeshTaskCreate): Promise<MeshTask> {
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
    /** The new task's row; its domain is its mission's. */
    const rowOf = (nowMs: number, now: string): Omit<MeshTaskRow, 'domain_id'> => ({
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
    if (this.ctx.store.dialect === 'postgres' && policy !== 'broadcast') {
      // One statement (pg-queue.ts pgCreate) on the hot pool: 500 creations at once (as
      // bench/queue queues its tasks) ran at 3 900 tasks/s against 1 620 as the transaction
      // below (medians of 3).
      const nowMs = this.ctx.clock.now();
      const row = rowOf(nowMs, iso(nowMs));
      const made = await pgCreate(this.ctx.write, p, row);
      if (made === null) throw new SvcError('not_found', `mission ${missionId} not found`);
      if (!made.agentEnrolled) throw assignedAgentNotFound(row.assigned_agent_id ?? '', made.domainId);
      const task = taskOf({ ...row, domain_id: made.domainId });
      this.hooks.onClaimable?.(task);
      return task;
    }
    const created: MeshTask[] = [];
    const task = await this.ctx.write(async (tx) => {
      const mission = await tx.db
        .selectFrom('missions')
        .select(['id', 'domain_id'])
        .where('id', '=', missionId)
        .executeTakeFirst();
      if (!mission || !canSeeDomain(p, mission.domain_id)) {
        throw new SvcError('not_found', `mission ${missionId} not found`);
      }
      // An assigned task whose agent is not enrolled in the mission's domain would never be
      // claimed: refuse it (nothing is written).
      if (body.assigned_agent_id) {
        const agent = await tx.db
          .selectFrom('agents')
          .select('id')
          .where('id', '=', body.assigned_agent_id)
          .where('domain_id', '=', mission.domain_id)
          .executeTakeFirst();
        if (!agent) throw assignedAgentNotFound(body.assigned_agent_id, mission.domain_id);
      }
      const base: MeshTaskRow = { ...rowOf(tx.nowMs, tx.now), domain_id: mission.domain_id };
      await tx.db.insertInto('mesh_tasks').values(base).execute();
      await tx.db.insertInto('mesh_task_missions').values({ mission_id: missionId, id: base.id }).execute();
      const parent = taskOf(base);
      transitionEvent(tx, parent, 'created');
      if (policy !== 'broadcast') {
        created.push(parent);
        return parent;
      }
      // Broadcast: one run per eligible agent enrolled now, each claimable only by its agent.
      const agents = await tx.db
        .selectFrom('agents')
        .selectAll()
        .where('domain_id', '=', mission.domain_id)
        .orderBy('id')
        .execute();
      const eligible = agents.filter((a) => hasCaps(a, caps));
      // A broadcast without runs would stay pending forever: refuse it (nothing is written).
      if (eligible.length === 0) {
        throw new SvcError(
          'conflict',
          `no agent enrolled in domain ${mission.domain_id} has the required capabilities ${JSON.stringify(caps)}: a broadcast task needs at least one`,
        );
      }
      for (const a of eligible) {
        const run: MeshTaskRow = {
          ...base,
          id: newId('mt', tx.nowMs),
          parent_id: base.id,
          claim_policy: 'assigned',
          assigned_agent_id: a.id,
        };
        await tx.db.insertInto('mesh_tasks').values(run).execute();
        await tx.db.insertInto('mesh_task_missions').values({ mission_id: missionId, id: run.id }).execute();
        const t = taskOf(run);
        transitionEvent(tx, t, 'created');
        created.push(t);
      }
      return parent;
    });
    for (const t of created) this.hooks.onClaimable?.(t);
    return task;
  }

  /**
   * Claims the best task `agentId` may take: highest priority, then oldest; assigned tasks
   * only by their agent; required capabilities must be a subset of the agent's. Null: none.
   */
  async claim(p: Principal, agentId: string, missionId?: string): Promise<Claimed | null> {
    return (await this.claimMany(p, agentId, missionId, 1))[0] ?? null;
  }

  /**
   * Claims up to `max` tasks for one agent at once (each with its own lease), best first.
   * On PostgreSQL one statement (pg-queue.ts); on SQLite one write.
   */
  async claimMany(
    p: Principal,
    agentId: string,
    missionId: string | undefined,
    max: number,
  ): Promise<Claimed[]> {
    if (this.ctx.store.dialect === 'postgres') {
      const claims = await pgClaim(this.ctx.write, p, agentId, missionId, max, this.ctx.clock.now());
      if (claims === null) throw agentNotFound(agentId);
      return claims.sort((a, b) => b.task.priority - a.task.priority || (a.task.id < b.task.id ? -1 : 1));
    }
    return this.ctx.write(async (tx) => {
      const agent = await tx.db.selectFrom('agents').selectAll().where('id', '=', agentId).executeTakeFirst();
      if (
        !agent ||
        !canSeeDomain(p, agent.domain_id) ||
        (p.nodeId !== undefined && agent.node_id !== p.nodeId)
      ) {
        throw agentNotFound(agentId);
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
        if (!hasCaps(agent, JSON.parse(row.required_capabilities) as string[])) continue;
        const leaseId = `lease_${randomBytes(12).toString('hex')}`;
        const expires = iso(tx.nowMs + Number(row.lease_seconds) * 1000);
        // SQLite has one writer: the compare-and-set on state is all a claim needs.
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
        transitionEvent(tx, task, 'claimed');
        claims.push({ task, lease_id: leaseId, lease_seconds: Number(row.lease_seconds) });
      }
      return claims;
    });
  }

  /**
   * A lease-holding transition on PostgreSQL in one statement (pg-queue.ts); the general
   * transaction (`slow`) on SQLite, for broadcast runs (their parent may settle) and for
   * the rare cases the statement leaves alone (start of a task already running).
   */
  private async fastLeased(
    p: Principal,
    taskId: string,
    leaseId: string,
    change: LeasedChange,
    arg: string | null,
    slow: () => Promise<MeshTask>,
  ): Promise<MeshTask> {
    const batcher = this.batchers?.get(change.name);
    if (!batcher) return slow();
    return this.afterFast(p, taskId, leaseId, await batcher.run(p, taskId, leaseId, arg), slow);
  }

  /** The outcome of a fast lease-holding statement for one request (see fastLeased). */
  private async afterFast(
    p: Principal,
    taskId: string,
    leaseId: string,
    r: LeasedRow | null,
    slow: () => Promise<MeshTask>,
  ): Promise<MeshTask> {
    if (r && r.id !== null) return taskOf(r);
    return this.leftAlone(p, taskId, leaseId, r, slow);
  }

  /**
   * A request a fast statement left alone (`r.id` null; `r` null: no such task): not found,
   * a stale lease, or a case for the general path (`slow`).
   */
  private async leftAlone<T>(
    p: Principal,
    taskId: string,
    leaseId: string,
    r: { cur_state: string | null; cur_domain: string | null; cur_lease: string | null } | null,
    slow: () => Promise<T>,
  ): Promise<T> {
    if (!r || r.cur_domain === null || !canSeeDomain(p, r.cur_domain)) {
      throw new SvcError('not_found', `mesh task ${taskId} not found`);
    }
    if (r.cur_lease === leaseId) return slow();
    throw new SvcError(
      'stale_lease',
      `lease ${leaseId} is not the current lease of mesh task ${taskId} (state ${r.cur_state}): the task was reclaimed, cancelled or finished`,
    );
  }

  /** A lease-holding transition: compare-and-set on the lease, then the new state. */
  private async leased(
    p: Principal,
    taskId: string,
    leaseId: string,
    from: MeshState[],
    change: (row: MeshTaskRow, tx: Tx) => Partial<MeshTaskRow> | null,
    action: string,
    extra: (row: MeshTaskRow) => Record<string, unknown> = () => ({}),
  ): Promise<MeshTask> {
    return this.ctx.write(async (tx) => {
      const row = await this.load(tx.db, p, taskId);
      if (row.lease_id !== leaseId || !from.includes(row.state as MeshState)) {
        throw new SvcError(
          'stale_lease',
          `lease ${leaseId} is not the current lease of mesh task ${taskId} (state ${row.state}): the task was reclaimed, cancelled or finished`,
        );
      }
      await this.checkLeaseOwner(tx.db, p, row);
      checkNotExpired(row, tx.now);
      await this.lockParent(tx, row);
      const set = change(row, tx);
      if (set === null) return taskOf(row);
      const res = await tx.db
        .updateTable('mesh_tasks')
        .set({ ...set, updated_at: tx.now })
        .where('id', '=', taskId)
        .where('lease_id', '=', leaseId)
        .where('state', '=', row.state)
        .executeTakeFirst();
      if (Number(res.numUpdatedRows) !== 1) {
        throw new SvcError(
          'stale_lease',
          `mesh task ${taskId} changed meanwhile: lease ${leaseId} is no longer current`,
        );
      }
      const t = taskOf({ ...row, ...set, updated_at: tx.now } as MeshTaskRow);
      if (action !== 'heartbeat') transitionEvent(tx, t, action, extra(row));
      if (TERMINAL.includes(t.state)) await this.settleParent(tx, t);
      return t;
    });
  }

  start(p: Principal, taskId: string, leaseId: string) {
    return this.fastLeased(p, taskId, leaseId, START, null, () =>
      this.leased(
        p,
        taskId,
        leaseId,
        ['claimed', 'running'],
        (row) => (row.state === 'running' ? null : { state: 'running' }),
        'started',
      ),
    );
  }

  async heartbeat(p: Principal, taskId: string, leaseId: string): Promise<{ lease_expires_at: string }> {
    let expires = '';
    await this.leased(
      p,
      taskId,
      leaseId,
      ['claimed', 'running'],
      (row, tx) => {
        expires = iso(tx.nowMs + Number(row.lease_seconds) * 1000);
        return { lease_expires_at: expires };
      },
      'heartbeat',
    );
    return { lease_expires_at: expires };
  }

  async progress(
    p: Principal,
    taskId: string,
    leaseId: string,
    update: { message: string; percent?: number; data?: Record<string, unknown> },
  ): Promise<void> {
    await this.ctx.write(async (tx) => {
      const row = await this.load(tx.db, p, taskId);
      if (row.lease_id !== leaseId || !['claimed', 'running'].includes(row.state)) {
        throw new SvcError('stale_lease', `lease ${leaseId} is not the current lease of mesh task ${taskId}`);
      }
      await this.checkLeaseOwner(tx.db, p, row);
      checkNotExpired(row, tx.now);
      tx.emit({
        type: 'progress',
        domain_id: row.domain_id,
        mission_id: row.mission_id,
        agent_id: row.claimed_by,
        status: row.state,
        payload: {
          task_id: taskId,
          kind: 'progress',
          text: update.message,
          ...(update.percent !== undefined ? { percent: update.percent } : {}),
          ...(update.data ? { data: update.data } : {}),
        },
      });
    });
  }

  complete(p: Principal, taskId: string, leaseId: string, result: unknown) {
    const json = result === undefined ? null : JSON.stringify(result);
    return this.fastLeased(p, taskId, leaseId, COMPLETE, json, () =>
      this.completeSlow(p, taskId, leaseId, json),
    );
  }

  /** A completion in a general transaction (SQLite; broadcast runs; the rare cases of fastLeased). */
  private completeSlow(p: Principal, taskId: string, leaseId: string, json: string | null) {
    return this.leased(
      p,
      taskId,
      leaseId,
      ['claimed', 'running'],
      () => ({ state: 'completed', result: json, lease_id: null, lease_expires_at: null }),
      'completed',
    );
  }

  /**
   * Completes several tasks, each on its own lease and with its own outcome (one stale lease
   * does not stop the others). On PostgreSQL they share statements (the coalescer).
   */
  async completeMany(
    p: Principal,
    items: { task_id: string; lease_id: string; result?: unknown }[],
  ): Promise<CompleteOutcome[]> {
    const outcome = (i: (typeof items)[number], task: Promise<MeshTask>) =>
      task.then(
        (t): CompleteOutcome => ({ task_id: i.task_id, ok: true, updated_at: t.updated_at }),
        (e: unknown): CompleteOutcome => {
          if (!(e instanceof SvcError)) throw e;
          return { task_id: i.task_id, ok: false, code: e.code, detail: e.message };
        },
      );
    const batcher = this.acks;
    if (!batcher)
      return Promise.all(items.map((i) => outcome(i, this.complete(p, i.task_id, i.lease_id, i.result))));
    // PostgreSQL: the whole batch handed to the coalescer at once; only the requests its
    // statement left alone (not found, stale, or for the general path) go one by one.
    const args = items.map((i) => (i.result === undefined ? null : JSON.stringify(i.result)));
    const rows = await batcher.runMany(
      p,
      items.map((i, k) => ({ taskId: i.task_id, leaseId: i.lease_id, arg: args[k] ?? null })),
    );
    const out: (CompleteOutcome | Promise<CompleteOutcome>)[] = rows.map((r, k) => {
      const i = items[k] as (typeof items)[number];
      if (r && r.id !== null) return { task_id: i.task_id, ok: true, updated_at: r.updated_at };
      const json = args[k] ?? null;
      return outcome(
        i,
        this.leftAlone(p, i.task_id, i.lease_id, r, () => this.completeSlow(p, i.task_id, i.lease_id, json)),
      );
    });
    return out.some((o) => o instanceof Promise) ? Promise.all(out) : (out as CompleteOutcome[]);
  }

  fail(p: Principal, taskId: string, leaseId: string, reason: string) {
    return this.fastLeased(p, taskId, leaseId, FAIL, reason, () =>
      this.leased(
        p,
        taskId,
        leaseId,
        ['claimed', 'running'],
        () => ({ state: 'failed', failure_reason: reason, lease_id: null, lease_expires_at: null }),
        'failed',
        () => ({ reason }),
      ),
    );
  }

  /**
   * failed → pending with attempt + 1. A broadcast task's retry retries its failed runs (its
   * completed ones stand); a run's retry reopens its failed parent, which settles again when
   * the runs end. Runs of a cancelled broadcast stay ended.
   */
  async retry(p: Principal, taskId: string): Promise<MeshTask> {
    const claimable: MeshTask[] = [];
    const task = await this.ctx.write(async (tx) => {
      claimable.length = 0;
      const row = await this.load(tx.db, p, taskId);
      if (row.state !== 'failed') {
        throw new SvcError(
          'illegal_transition',
          `mesh task ${taskId} is ${row.state}: only a failed task can be retried`,
        );
      }
      if (row.claim_policy === 'broadcast') {
        await this.lockParent(tx, { parent_id: row.id });
        const runs = await tx.db
          .selectFrom('mesh_tasks')
          .selectAll()
          .where('parent_id', '=', taskId)
          .where('state', '=', 'failed')
          .orderBy('id')
          .execute();
        if (runs.length === 0) {
          throw new SvcError(
            'illegal_transition',
            `broadcast task ${taskId} has no failed run to retry (the runs that did not complete were cancelled): submit it again`,
          );
        }
        for (const r of runs) claimable.push(await this.requeue(tx, r));
        return this.requeue(tx, row);
      }
      if (row.parent_id) {
        await this.lockParent(tx, row);
        const parent = await tx.db
          .selectFrom('mesh_tasks')
          .selectAll()
          .where('id', '=', row.parent_id)
          .executeTakeFirst();
        if (parent?.state === 'cancelled') {
          throw new SvcError(
            'illegal_transition',
            `mesh task ${taskId} is a run of broadcast task ${parent.id}, which is cancelled`,
          );
        }
        if (parent?.state === 'failed') {
          const set = { state: 'pending', failure_reason: null, updated_at: tx.now };
          await tx.db.updateTable('mesh_tasks').set(set).where('id', '=', parent.id).execute();
          transitionEvent(tx, taskOf({ ...parent, ...set }), 'reopened');
        }
      }
      const t = await this.requeue(tx, row);
      claimable.push(t);
      return t;
    });
    for (const t of claimable) this.hooks.onClaimable?.(t);
    return task;
  }

  /** A failed task back to pending for its next attempt, with its `retried` event. */
  private async requeue(tx: Tx, row: MeshTaskRow): Promise<MeshTask> {
    const set = {
      state: 'pending',
      attempt: Number(row.attempt) + 1,
      max_attempts: Math.max(Number(row.max_attempts), Number(row.attempt) + 1),
      failure_reason: null,
      claimed_by: null,
      lease_id: null,
      lease_expires_at: null,
      updated_at: tx.now,
    };
    const res = await tx.db
      .updateTable('mesh_tasks')
      .set(set)
      .where('id', '=', row.id)
      .where('state', '=', 'failed')
      .executeTakeFirst();
    if (Number(res.numUpdatedRows) !== 1)
      throw new SvcError('illegal_transition', `mesh task ${row.id} changed meanwhile`);
    const t = taskOf({ ...row, ...set });
    transitionEvent(tx, t, 'retried');
    return t;
  }

  async cancel(p: Principal, taskId: string): Promise<MeshTask> {
    // Tasks an agent held (claimed or running) when cancelled: its node is told to stop them.
    const held: MeshTask[] = [];
    const task = await this.ctx.write(async (tx) => {
      held.length = 0;
      const row = await this.load(tx.db, p, taskId);
      await this.lockParent(tx, row);
      if (TERMINAL.includes(row.state as MeshState)) {
        throw new SvcError('illegal_transition', `mesh task ${taskId} is already ${row.state}`);
      }
      const set = { state: 'cancelled', lease_id: null, lease_expires_at: null, updated_at: tx.now };
      const res = await tx.db
        .updateTable('mesh_tasks')
        .set(set)
        .where('id', '=', taskId)
        .where('state', '=', row.state)
        .executeTakeFirst();
      if (Number(res.numUpdatedRows) !== 1)
        throw new SvcError('illegal_transition', `mesh task ${taskId} changed meanwhile`);
      const t = taskOf({ ...row, ...set });
      transitionEvent(tx, t, 'cancelled');
      if (row.state !== 'pending') held.push(t);
      // Cancelling a broadcast task cancels its runs that have not ended.
      const runs = await tx.db
        .selectFrom('mesh_tasks')
        .selectAll()
        .where('parent_id', '=', taskId)
        .where('state', 'in', ['pending', 'claimed', 'running'])
        .execute();
      for (const r of runs) {
        await tx.db.updateTable('mesh_tasks').set(set).where('id', '=', r.id).execute();
        const run = taskOf({ ...r, ...set });
        transitionEvent(tx, run, 'cancelled');
        if (r.state !== 'pending') held.push(run);
      }
      await this.settleParent(tx, t);
      return t;
    });
    for (const t of held) this.hooks.onCancelled?.(t);
    return task;
  }

  /**
   * Returns tasks whose lease expired to `pending` (attempt + 1), or fails them past
   * max_attempts. Returns how many were swept.
   */
  async sweep(): Promise<number> {
    const requeued: MeshTask[] = [];
    const n = await this.ctx.write(async (tx) => {
      const expired = await tx.db
        .selectFrom('mesh_tasks')
        .selectAll()
        .where(sql<boolean>`state in ('claimed', 'running')`) // partial index mesh_tasks_leased
        .where('lease_expires_at', '<', tx.now)
        .orderBy('lease_expires_at')
        .limit(500)
        .execute();
      let count = 0;
      for (const row of expired) {
        await this.lockParent(tx, row);
        const exhausted = Number(row.attempt) >= Number(row.max_attempts);
        const set = exhausted
          ? {
              state: 'failed',
              failure_reason: `lease expired on attempt ${row.attempt} of ${row.max_attempts} (agent ${row.claimed_by ?? '?'} stopped heartbeating)`,
              lease_id: null,
              lease_expires_at: null,
              updated_at: tx.now,
            }
          : {
              state: 'pending',
              attempt: Number(row.attempt) + 1,
              claimed_by: null,
              lease_id: null,
              lease_expires_at: null,
              updated_at: tx.now,
            };
        const res = await tx.db
          .updateTable('mesh_tasks')
          .set(set)
          .where('id', '=', row.id)
          .where('lease_id', '=', row.lease_id)
          .where('state', '=', row.state)
          .executeTakeFirst();
        if (Number(res.numUpdatedRows) !== 1) continue;
        const t = taskOf({ ...row, ...set } as MeshTaskRow);
        transitionEvent(
          tx,
          t,
          exhausted ? 'failed' : 'lease_expired',
          exhausted ? { reason: t.failure_reason } : {},
        );
        if (exhausted) await this.settleParent(tx, t);
        else requeued.push(t);
        count++;
      }
      return count;
    });
    for (const t of requeued) this.hooks.onClaimable?.(t);
    return n;
  }

  /**
   * PostgreSQL: locks a broadcast run's parent before the run changes. Runs ending at once
   * on several connections then settle the parent one after the other, each seeing the
   * others' committed ends (without it, each could see the others still running and none
   * settle it); and every path locks parent before run, so none deadlock.
   */
  private async lockParent(tx: Tx, row: Pick<MeshTaskRow, 'parent_id'>): Promise<void> {
    if (!row.parent_id || this.ctx.store.dialect !== 'postgres') return;
    await sql`select id from mesh_tasks where id = ${row.parent_id} for update`.execute(tx.db);
  }

  /** A broadcast parent ends when all its runs ended: completed if all completed. */
  private async settleParent(tx: Tx, t: MeshTask): Promise<void> {
    if (!t.parent_id) return;
    await this.lockParent(tx, t);
    const runs = await tx.db
      .selectFrom('mesh_tasks')
      .select('state')
      .where('parent_id', '=', t.parent_id)
      .execute();
    if (runs.some((r) => !TERMINAL.includes(r.state as MeshState))) return;
    const parent = await tx.db
      .selectFrom('mesh_tasks')
      .selectAll()
      .where('id', '=', t.parent_id)
      .executeTakeFirst();
    if (!parent || TERMINAL.includes(parent.state as MeshState)) return;
    const state = runs.every((r) => r.state === 'completed') ? 'completed' : 'failed';
    const set = {
      state,
      failure_reason: state === 'failed' ? 'one or more broadcast runs did not complete' : null,
      updated_at: tx.now,
    };
    await tx.db.updateTable('mesh_tasks').set(set).where('id', '=', parent.id).execute();
    transitionEvent(tx, taskOf({ ...parent, ...set }), state);
  }
}

/**
 * Fencing: a lease past its expiry is dead even before the sweeper has returned the task to
 * pending (the sweep runs every second), so a worker that stopped heartbeating in time can
 * neither extend it nor finish the task with it. ISO 8601 UTC text compares in time order.
 */
function checkNotExpired(row: MeshTaskRow, now: string): void {
  if (row.lease_expires_at !== null && row.lease_expires_at <= now) {
    throw new SvcError(
      'stale_lease',
      `lease ${row.lease_id} of mesh task ${row.id} expired at ${row.lease_expires_at}: the task goes back to pending`,
    );
  }
}

function assignedAgentNotFound(agentId: string, domainId: string): SvcError {
  return new SvcError(
    'agent_not_found',
    `agent ${agentId} is not enrolled in domain ${domainId} (the mission's): an assigned task needs an agent that can claim it (see: svc agent list --domain ${domainId})`,
  );
}

function agentNotFound(agentId: string): SvcError {
  return new SvcError(
    'agent_not_found',
    `agent ${agentId} is not enrolled here: run "svc daemon agent enroll"`,
  );
}

const START: LeasedChange = {
  name: 'mesh_start',
  action: 'started',
  from: ['claimed'],
  set: "state = 'running'",
};
const COMPLETE: LeasedChange = {
  name: 'mesh_complete',
  action: 'completed',
  from: ['claimed', 'running'],
  set: "state = 'completed', result = req.arg, lease_id = null, lease_expires_at = null",
};
/** COMPLETE answered with an acknowledgement: completeMany (its caller holds the tasks). */
const COMPLETE_ACK: LeasedChange = { ...COMPLETE, name: 'mesh_complete_ack', ack: true };
const FAIL: LeasedChange = {
  name: 'mesh_fail',
  action: 'failed',
  from: ['claimed', 'running'],
  set: "state = 'failed', failure_reason = req.arg, lease_id = null, lease_expires_at = null",
  extraPayload: `',"reason":' || coalesce(to_json(failure_reason)::text, 'null')`,
};
/** Every lease-holding change the PostgreSQL store runs (exported for tests of their plans). */
export const LEASED_CHANGES = [START, COMPLETE, COMPLETE_ACK, FAIL];

function hasCaps(agent: AgentRow, required: string[]): boolean {
  if (required.length === 0) return true;
  const have = new Set(JSON.parse(agent.capabilities) as string[]);
  return required.every((c) => have.has(c));
}
