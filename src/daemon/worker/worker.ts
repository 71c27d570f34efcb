// The task worker (docs/worker.md): `svc run <runtime> --domain D` starts a work loop
// (claim-loop.ts) for an agent of this node enrolled in D; each claimed task runs in an
// ephemeral subagent (subagent.ts). This file is the component: the operations behind its
// mgmt.sock methods (methods.ts), control-channel wake-ups and cancels, loops kept in state.db and resumed at start, and recovery: subagents
// a crashed svcd left running are killed at start (their tasks come back when leases expire).

import type { Clock } from '../../lib/clock.js';
import { iso, systemClock } from '../../lib/clock.js';
import type { Logger } from '../../lib/log.js';
import { SvcError } from '../../protocol/errors.js';
import type { Agent } from '../../protocol/mesh.js';
import type { RuntimeKind } from '../../protocol/runtimes.js';
import type { AgentEnrollParams, WorkerEvent, WorkerRef, WorkerStartParams } from '../../protocol/worker.js';
import type { Component } from '../component.js';
import type { WorkerMetrics } from '../metrics.js';
import type { CallContext } from '../mgmt/method.js';
import type { DaemonPaths } from '../paths.js';
import { reapOrphanGroup } from '../process/group.js';
import { withoutCredentials } from '../runtimes/env.js';
import type { RuntimeRunner } from '../runtimes/runner.js';
import type { StateStore } from '../state/store.js';
import type { TowerApi } from '../tower-client/api.js';
import type { ControlChannel } from '../tower-client/control.js';
import { type ApprovalsApi, ApprovalWaits, createTowerApprovals } from './approval-waits.js';
import { ClaimLoop, type ClaimLoopStatus } from './claim-loop.js';
import type { WorkerConfig } from './config-section.js';
import type { MeshWorkApi } from './mesh-api.js';
import type { AgentPolicyConfig } from './policy-section.js';
import { createWorkerStore, type LoopRow } from './store.js';
import { runSubagent, type SubagentOutcome } from './subagent.js';
import { createTowerMesh } from './tower-mesh.js';

interface Loop {
  row: LoopRow;
  claims: ClaimLoop;
}

/** The component, and what its mgmt.sock methods (methods.ts) call. */
export interface Worker extends Component {
  /** agent.enroll: a new agent of this node on the tower. */
  enroll(p: AgentEnrollParams): Promise<Agent>;
  /** worker.start: a work loop for runtime@domain (an existing one is woken and resized). */
  startLoop(p: WorkerStartParams): Promise<LoopStatus>;
  /** worker.stop: drains (or, with now, stops) the loops `ref` selects. */
  stopLoops(ref: WorkerRef): Promise<{ stopped: LoopStatus[] }>;
  /** worker.status */
  loops(): { loops: LoopStatus[] };
  /** worker.follow: streams WorkerEvents to the caller until it or svcd goes away. */
  follow(ref: WorkerRef, call: CallContext): Promise<unknown>;
}

export type LoopStatus = ReturnType<typeof loopStatus>;

/** What the worker uses of svcd (daemon.ts passes its DaemonContext). */
export interface WorkerContext {
  clock: Clock;
  log: Logger;
  paths: Pick<DaemonPaths, 'workDir'>;
  /** svcd's environment (credentials are stripped before git and subagents see it). */
  env: NodeJS.ProcessEnv;
  state: StateStore;
  tower: TowerApi;
  /** task_ready, task_cancelled and approval_decided arrive here; agents' presence goes out. */
  control: Pick<ControlChannel, 'on' | 'setAgentStatus'>;
  identity: { node_id: string };
  /** Aborted when svcd begins shutting down (ends worker.follow streams). */
  shutdown: AbortSignal;
}

export interface WorkerDeps {
  /** The mesh (default: the tower over ctx.tower). */
  api?: MeshWorkApi;
  /** [worker] of config.toml, as read at svcd start. */
  config: WorkerConfig;
  /** [agent_policy] of config.toml: what task subagents may do (docs/agents.md). */
  policy: AgentPolicyConfig;
  /** Approvals on the tower (default: over ctx.tower). */
  approvals?: ApprovalsApi;
  /** [supervisor] stop_grace: SIGTERM → SIGKILL when orphaned subagents are reaped. */
  stopGraceMs: number;
  /** Real-time waits for process exits when reaping orphans. */
  waits?: Clock;
  /** Runs are counted here by outcome (svcd's metrics). */
  metrics?: WorkerMetrics;
}

export function createWorker(ctx: WorkerContext, runner: () => RuntimeRunner, deps: WorkerDeps): Worker {
  const log = ctx.log.child({ component: 'worker' });
  const store = createWorkerStore(ctx.state);
  const tower = deps.api ?? createTowerMesh(ctx.tower);
  const approvals = deps.approvals ?? createTowerApprovals(ctx.tower);
  const waits = new ApprovalWaits({
    api: approvals,
    clock: ctx.clock,
    log: log.child({ component: 'approvals' }),
    pollMs: deps.policy.approvalPollMs,
  });
  const followers = new Set<(e: WorkerEvent) => void>();
  const loops = new Map<string, Loop>();
  /** Loops stopped with drain, still finishing their subagents. */
  const draining = new Set<ClaimLoop>();
  const unsubscribe: (() => void)[] = [];
  const gitEnv = withoutCredentials(ctx.env);
  const config = deps.config;

  const emit = (e: Omit<WorkerEvent, 'at'>) => {
    if (followers.size === 0) return;
    const ev = { at: iso(ctx.clock.now()), ...e };
    for (const f of followers) f(ev);
  };
  /** The tower mesh, with progress also told to followers. */
  const api = (key: string): MeshWorkApi => ({
    claim: (agentId) => tower.claim(agentId),
    start: (taskId, leaseId) => tower.start(taskId, leaseId),
    heartbeat: (taskId, leaseId) => tower.heartbeat(taskId, leaseId),
    progress: (taskId, leaseId, p) => {
      emit({ loop: key, type: 'progress', task_id: taskId, message: p.message });
      return tower.progress(taskId, leaseId, p);
    },
    complete: (taskId, leaseId, result) => tower.complete(taskId, leaseId, result),
    fail: (taskId, leaseId, reason) => tower.fail(taskId, leaseId, reason),
    state: (taskId) => tower.state(taskId),
    artifact: (domainId, missionId, a) => tower.artifact(domainId, missionId, a),
  });

  async function enroll(p: AgentEnrollParams): Promise<Agent> {
    return ctx.tower.request<Agent>('POST', '/agents', p);
  }

  /** This node's agent of `runtime` in `domainId`, enrolled now if there is none. */
  async function agentFor(p: WorkerStartParams): Promise<Agent> {
    const q = new URLSearchParams({ node_id: ctx.identity.node_id, domain_id: p.domain_id, limit: '500' });
    const list = await ctx.tower.request<{ items: Agent[] }>('GET', `/agents?${q}`);
    const found = list.items.find((a) => a.runtime === p.runtime);
    if (found) return found;
    return enroll({
      domain_id: p.domain_id,
      runtime: p.runtime,
      name: `worker-${p.runtime}`,
      ...(p.capabilities ? { capabilities: p.capabilities } : {}),
    });
  }

  function startLoop(row: LoopRow): Loop {
    const c = config;
    // Presence on the tower: idle while the loop waits for work, busy while a subagent runs,
    // errored while claims fail (the tower refuses or cannot be reached).
    let running = 0;
    let claimFailing = false;
    const presence = () => {
      if (loops.get(row.loop_key) !== loop) return; // stopped: reported offline at stop
      ctx.control.setAgentStatus(row.agent_id, running > 0 ? 'busy' : claimFailing ? 'errored' : 'idle');
    };
    const baseApi = api(row.loop_key);
    const loopApi: MeshWorkApi = {
      ...baseApi,
      claim: (agentId) =>
        baseApi.claim(agentId).then(
          (lease) => {
            claimFailing = false;
            presence();
            return lease;
          },
          (e: unknown) => {
            claimFailing = true;
            presence();
            throw e;
          },
        ),
    };
    const onOutcome = (o: SubagentOutcome) => {
      deps.metrics?.runs.inc({ outcome: o.state });
      const message =
        o.state === 'failed' ? o.reason.split('\n')[0] : o.state === 'abandoned' ? o.reason : undefined;
      emit({ loop: row.loop_key, type: o.state, task_id: o.task_id, ...(message ? { message } : {}) });
    };
    const claims = new ClaimLoop({
      agentId: row.agent_id,
      maxConcurrent: row.max_concurrent,
      pollMs: row.poll_ms,
      api: loopApi,
      clock: ctx.clock,
      log: log.child({ loop: row.loop_key }),
      onOutcome,
      execute: (lease, signal) => {
        emit({ loop: row.loop_key, type: 'claimed', task_id: lease.task.id, title: lease.task.title });
        running++;
        presence();
        return runSubagent(
          {
            runtimes: runner(),
            api: loopApi,
            clock: ctx.clock,
            log,
            workRoot: ctx.paths.workDir,
            env: gitEnv,
            timeoutMs: row.timeout_ms ?? c.taskTimeoutMs,
            cleanup: c.cleanup,
            retryFrom: c.retryFrom,
            governance: { approvals, waits, policy: deps.policy },
          },
          {
            lease,
            agentId: row.agent_id,
            runtime: row.runtime,
            signal,
            onSpawn: (runId, pgid) => {
              void store
                .saveRun({
                  task_id: lease.task.id,
                  run_id: runId,
                  pgid,
                  agent_id: row.agent_id,
                  started_at: iso(ctx.clock.now()),
                })
                .catch((e: unknown) => log.warn({ err: e }, 'cannot record the run'));
            },
          },
        ).finally(() => {
          running--;
          presence();
          return store
            .removeRun(lease.task.id)
            .catch((e: unknown) => log.warn({ err: e }, 'cannot forget the run'));
        });
      },
    });
    const loop = { row, claims };
    loops.set(row.loop_key, loop);
    claims.start();
    presence();
    log.info({ agent: row.agent_id, runtime: row.runtime, domain: row.domain_id }, 'work loop started');
    return loop;
  }

  const statusOf = (l: Loop) => loopStatus(l, config.taskTimeoutMs);

  function select(ref: WorkerRef): Loop[] {
    return [...loops.values()].filter(
      (l) =>
        (!ref.runtime || l.row.runtime === ref.runtime) &&
        (!ref.domain_id || l.row.domain_id === ref.domain_id),
    );
  }

  /** Kills subagents a previous svcd left running (it died mid-task): see docs/worker.md. */
  async function reapOrphans(): Promise<void> {
    const waits = deps.waits ?? systemClock;
    for (const r of await store.runs()) {
      try {
        const killed = await reapOrphanGroup(r.pgid, r.run_id, deps.stopGraceMs, waits);
        if (killed) log.warn({ task: r.task_id, run: r.run_id, pgid: r.pgid }, 'killed an orphaned subagent');
      } catch (e) {
        log.error({ err: e, task: r.task_id, pgid: r.pgid }, 'cannot stop an orphaned subagent');
      }
      await store.removeRun(r.task_id);
    }
  }

  async function follow(ref: WorkerRef, call: CallContext): Promise<unknown> {
    const keys = new Set(select(ref).map((l) => l.row.loop_key));
    const f = (e: WorkerEvent) => {
      if (keys.size === 0 || keys.has(e.loop)) call.notify('worker.event', e);
    };
    followers.add(f);
    try {
      await new Promise<void>((resolve) => {
        if (call.signal.aborted || ctx.shutdown.aborted) return resolve();
        call.signal.addEventListener('abort', () => resolve(), { once: true });
        ctx.shutdown.addEventListener('abort', () => resolve(), { once: true });
      });
    } finally {
      followers.delete(f);
    }
    return {};
  }

  /** Before start() the loops of state.db are not running yet: refuse, as at start-up. */
  let started = false;
  const ready = () => {
    if (!started) throw new SvcError('unavailable', 'svcd is still starting; retry');
  };

  return {
    name: 'worker',
    async enroll(p) {
      ready();
      return enroll(p);
    },
    async startLoop(p) {
      ready();
      const key = `${p.runtime}@${p.domain_id}`;
      const existing = loops.get(key);
      if (existing) {
        if (p.max_concurrent && p.max_concurrent !== existing.row.max_concurrent) {
          existing.row.max_concurrent = p.max_concurrent;
          existing.claims.setMaxConcurrent(p.max_concurrent);
          await store.saveLoop(existing.row);
        }
        existing.claims.wake('start');
        return statusOf(existing);
      }
      const agent = await agentFor(p);
      const row: LoopRow = {
        loop_key: key,
        runtime: p.runtime as RuntimeKind,
        domain_id: p.domain_id,
        agent_id: agent.id,
        max_concurrent: p.max_concurrent ?? config.maxConcurrent,
        poll_ms: p.poll_seconds !== undefined ? Math.round(p.poll_seconds * 1000) : config.pollMs,
        timeout_ms: p.timeout_seconds !== undefined ? p.timeout_seconds * 1000 : null,
        started_at: iso(ctx.clock.now()),
        task_ready: p.task_ready === false ? 0 : 1,
      };
      await store.saveLoop(row);
      return statusOf(startLoop(row));
    },
    async stopLoops(ref) {
      ready();
      const chosen = select(ref);
      if (chosen.length === 0)
        throw new SvcError('not_found', 'no work loop matches: see "svc worker status"');
      const out = chosen.map(statusOf);
      for (const l of chosen) {
        loops.delete(l.row.loop_key);
        ctx.control.setAgentStatus(l.row.agent_id, null);
        await store.removeLoop(l.row.loop_key);
        const stopping = l.claims.stop({ drain: !ref.now }).then(() => {
          emit({ loop: l.row.loop_key, type: 'stopped' });
          log.info({ loop: l.row.loop_key }, 'work loop stopped');
        });
        draining.add(l.claims);
        void stopping.finally(() => draining.delete(l.claims));
        if (ref.now) await stopping;
      }
      return { stopped: out };
    },
    loops() {
      ready();
      return { loops: [...loops.values()].map(statusOf) };
    },
    async follow(ref, call) {
      ready();
      return follow(ref, call);
    },
    async start() {
      await store.migrate();
      await reapOrphans();
      unsubscribe.push(
        ctx.control.on('task_ready', (msg) => {
          for (const l of loops.values())
            if (l.row.domain_id === msg.domain_id && l.row.task_ready) l.claims.wake('task_ready');
        }),
        ctx.control.on('task_cancelled', (msg) => {
          for (const l of loops.values()) l.claims.cancelTask(msg.task_id, 'cancelled');
        }),
        ctx.control.on('approval_decided', (msg) => waits.decided(msg.approval_id, msg.status, msg.reason)),
        // Decisions made while the channel was down are learnt at once on reconnect.
        ctx.control.on('welcome', () => waits.pollAll()),
      );
      // Loops `svc run` started before a restart carry on.
      for (const row of await store.loops()) startLoop(row);
      started = true;
    },
    async stop() {
      for (const u of unsubscribe.splice(0)) u();
      // Subagents are stopped; their tasks go back to pending when the leases expire, and the
      // loops (still in state.db) resume at the next start.
      await Promise.all(
        [...loops.values(), ...[...draining].map((claims) => ({ claims }))].map((l) => l.claims.stop()),
      );
      loops.clear();
    },
    status() {
      return { loops: loops.size, running: [...loops.values()].reduce((n, l) => n + l.claims.size, 0) };
    },
  };
}

function loopStatus(l: Loop, defaultTimeoutMs: number) {
  const s: ClaimLoopStatus = l.claims.status();
  return {
    runtime: l.row.runtime,
    domain_id: l.row.domain_id,
    agent_id: l.row.agent_id,
    max_concurrent: s.max_concurrent,
    poll_seconds: l.row.poll_ms / 1000,
    timeout_seconds: (l.row.timeout_ms ?? defaultTimeoutMs) / 1000,
    started_at: l.row.started_at,
    task_ready: l.row.task_ready === 1,
    running: s.running,
    completed: s.counts.completed,
    failed: s.counts.failed,
    counts: s.counts,
    last_poll_at: s.last_poll_at,
    last_error: s.last_error,
    recent_claims: s.recent_claims,
  };
}
