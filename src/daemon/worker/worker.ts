// The task worker (DESIGN §4 Task worker): `svc run <runtime> --domain D` starts a claim loop
// for an agent of this node enrolled in D. The loop claims at start, on every task_ready, on a
// periodic poll (a lost task_ready delays work, never strands it) and whenever a run ends;
// at most max_concurrent ephemeral subagents run at once, each in $SVC_HOME/work/<task_id>
// with lease heartbeats, progress reported to the tower, and complete/fail at the end.
// Loops live in memory: after a svcd restart, `svc run` starts them again, and tasks whose
// subagent died with svcd return to pending when their lease expires.
import { mkdir, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { type Static, Type } from '@sinclair/typebox';
import type { TimerHandle } from '../../lib/clock.js';
import { SvcError } from '../../protocol/errors.js';
import type { Agent, Claimed, MeshTask } from '../../protocol/mesh.js';
import { type RuntimeKind, RuntimeKindSchema } from '../../protocol/runtimes.js';
import type { Component, DaemonContext } from '../context.js';
import type { RuntimeRunner } from '../runtimes/runner.js';

export const WorkerStartParams = Type.Object(
  {
    runtime: RuntimeKindSchema,
    domain_id: Type.String({ minLength: 1, maxLength: 100 }),
    max_concurrent: Type.Optional(Type.Integer({ minimum: 1, maximum: 64 })),
    capabilities: Type.Optional(Type.Array(Type.String({ minLength: 1, maxLength: 100 }), { maxItems: 100 })),
    poll_seconds: Type.Optional(Type.Integer({ minimum: 1, maximum: 3600 })),
    timeout_seconds: Type.Optional(Type.Integer({ minimum: 1, maximum: 7 * 86_400 })),
  },
  { additionalProperties: false },
);
export type WorkerStartParams = Static<typeof WorkerStartParams>;

export const AgentEnrollParams = Type.Object(
  {
    domain_id: Type.String({ minLength: 1, maxLength: 100 }),
    runtime: RuntimeKindSchema,
    name: Type.Optional(Type.String({ minLength: 1, maxLength: 200 })),
    capabilities: Type.Optional(Type.Array(Type.String({ minLength: 1, maxLength: 100 }), { maxItems: 100 })),
  },
  { additionalProperties: false },
);
export type AgentEnrollParams = Static<typeof AgentEnrollParams>;

const WorkerRef = Type.Object(
  { runtime: Type.Optional(RuntimeKindSchema), domain_id: Type.Optional(Type.String()) },
  { additionalProperties: false },
);
type WorkerRef = Static<typeof WorkerRef>;

interface Running {
  task: MeshTask;
  abort: AbortController;
  startedAt: number;
}

interface Loop {
  key: string;
  runtime: RuntimeKind;
  domainId: string;
  agentId: string;
  maxConcurrent: number;
  pollMs: number;
  timeoutMs: number | undefined;
  running: Map<string, Running>;
  claiming: boolean;
  again: boolean;
  stopped: boolean;
  timer: TimerHandle | null;
  completed: number;
  failed: number;
  lastError: string | null;
}

export interface Worker extends Component {
  start(): Promise<void>;
}

export function createWorker(ctx: DaemonContext, runner: () => RuntimeRunner): Worker {
  const log = ctx.log.child({ component: 'worker' });
  const loops = new Map<string, Loop>();
  const mcp = <T>(tool: string, args: Record<string, unknown>) =>
    ctx.tower.request<{ result: T }>('POST', '/mcp/call', { tool, args }).then((r) => r.result);

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

  function schedule(loop: Loop) {
    loop.timer?.cancel();
    if (loop.stopped) return;
    loop.timer = ctx.clock.setTimeout(() => {
      wake(loop);
      schedule(loop);
    }, loop.pollMs);
  }

  function wake(loop: Loop) {
    if (loop.stopped) return;
    if (loop.claiming) {
      loop.again = true;
      return;
    }
    loop.claiming = true;
    void (async () => {
      try {
        do {
          loop.again = false;
          while (!loop.stopped && loop.running.size < loop.maxConcurrent) {
            const claimed = await mcp<Claimed | null>('claim_mesh_task', { agent_id: loop.agentId });
            if (!claimed) break;
            launch(loop, claimed);
          }
        } while (loop.again && !loop.stopped);
        loop.lastError = null;
      } catch (e) {
        loop.lastError = (e as Error).message;
        log.warn({ err: loop.lastError, agent: loop.agentId }, 'claiming failed; retrying at the next poll');
      } finally {
        loop.claiming = false;
      }
    })();
  }

  function launch(loop: Loop, claimed: Claimed) {
    const { task, lease_id: leaseId } = claimed;
    const abort = new AbortController();
    loop.running.set(task.id, { task, abort, startedAt: ctx.clock.now() });
    const workdir = join(ctx.paths.workDir, task.id);
    const hb: { timer: TimerHandle | null } = { timer: null };
    const beatEvery = Math.max(1000, Math.floor((claimed.lease_seconds * 1000) / 3));
    const beat = () => {
      hb.timer = ctx.clock.setTimeout(() => {
        mcp('heartbeat_mesh_task', { task_id: task.id, lease_id: leaseId }).then(
          () => {
            if (!abort.signal.aborted) beat();
          },
          (e: unknown) => {
            // 409: the lease is gone (expired and reclaimed, or cancelled): stop the run.
            if ((e as SvcError).code === 'stale_lease' || (e as SvcError).code === 'illegal_transition') {
              log.warn({ task: task.id }, 'lease lost; stopping the subagent');
              abort.abort();
            } else if (!abort.signal.aborted) beat();
          },
        );
      }, beatEvery);
    };
    void (async () => {
      let outcome: 'completed' | 'failed' = 'failed';
      try {
        await mkdir(workdir, { recursive: true, mode: 0o700 });
        await mcp('start_mesh_task', { task_id: task.id, lease_id: leaseId });
        beat();
        const result = await runner().run({
          runtime: loop.runtime,
          prompt: task.description ? `${task.title}\n\n${task.description}` : task.title,
          workdir,
          agentId: loop.agentId,
          taskId: task.id,
          signal: abort.signal,
          ...(loop.timeoutMs !== undefined ? { timeoutMs: loop.timeoutMs } : {}),
          onProgress: (u) => {
            const message = u.text ?? u.kind;
            void mcp('report_progress', {
              task_id: task.id,
              lease_id: leaseId,
              message: message.slice(0, 10_000),
              data: { kind: u.kind },
            }).catch(() => {});
          },
        });
        hb.timer?.cancel();
        if (result.ok) {
          await mcp('complete_mesh_task', {
            task_id: task.id,
            lease_id: leaseId,
            result: { summary: result.summary, run_id: result.run_id, duration_ms: result.duration_ms },
          });
          outcome = 'completed';
        } else {
          const tail = result.output_tail.trim().split('\n').slice(-20).join('\n');
          const reason = `${result.failure ?? 'failed'}${tail ? `\n--- output tail ---\n${tail}` : ''}`;
          await mcp('fail_mesh_task', {
            task_id: task.id,
            lease_id: leaseId,
            reason: reason.slice(0, 10_000),
          });
        }
      } catch (e) {
        log.warn({ err: (e as Error).message, task: task.id }, 'task run ended with an error');
        await mcp('fail_mesh_task', {
          task_id: task.id,
          lease_id: leaseId,
          reason: `svcd: ${(e as Error).message}`.slice(0, 10_000),
        }).catch(() => {});
      } finally {
        hb.timer?.cancel();
        loop.running.delete(task.id);
        if (outcome === 'completed') {
          loop.completed++;
          await rm(workdir, { recursive: true, force: true }).catch(() => {});
        } else loop.failed++;
        wake(loop);
      }
    })();
  }

  function statusOf(loop: Loop) {
    return {
      runtime: loop.runtime,
      domain_id: loop.domainId,
      agent_id: loop.agentId,
      max_concurrent: loop.maxConcurrent,
      poll_seconds: loop.pollMs / 1000,
      running: [...loop.running.values()].map((r) => ({
        task_id: r.task.id,
        title: r.task.title,
        started_at: new Date(r.startedAt).toISOString(),
      })),
      completed: loop.completed,
      failed: loop.failed,
      last_error: loop.lastError,
    };
  }

  function select(ref: WorkerRef): Loop[] {
    return [...loops.values()].filter(
      (l) => (!ref.runtime || l.runtime === ref.runtime) && (!ref.domain_id || l.domainId === ref.domain_id),
    );
  }

  function stopLoop(loop: Loop, cancelRunning: boolean) {
    loop.stopped = true;
    loop.timer?.cancel();
    if (cancelRunning) for (const r of loop.running.values()) r.abort.abort();
    loops.delete(loop.key);
  }

  return {
    name: 'worker',
    async start() {
      ctx.control.on('task_ready', (msg) => {
        for (const l of loops.values()) if (l.domainId === msg.domain_id) wake(l);
      });
      ctx.control.on('task_cancelled', (msg) => {
        for (const l of loops.values()) l.running.get(msg.task_id)?.abort.abort();
      });
      ctx.mgmt.register(
        'agent.enroll',
        async (params) => enroll(params as AgentEnrollParams),
        AgentEnrollParams,
      );
      ctx.mgmt.register(
        'worker.start',
        async (params) => {
          const p = params as WorkerStartParams;
          const key = `${p.runtime}@${p.domain_id}`;
          const existing = loops.get(key);
          if (existing) {
            if (p.max_concurrent) existing.maxConcurrent = p.max_concurrent;
            wake(existing);
            return statusOf(existing);
          }
          const agent = await agentFor(p);
          const loop: Loop = {
            key,
            runtime: p.runtime,
            domainId: p.domain_id,
            agentId: agent.id,
            maxConcurrent: p.max_concurrent ?? 3,
            pollMs: (p.poll_seconds ?? 30) * 1000,
            timeoutMs: p.timeout_seconds ? p.timeout_seconds * 1000 : undefined,
            running: new Map(),
            claiming: false,
            again: false,
            stopped: false,
            timer: null,
            completed: 0,
            failed: 0,
            lastError: null,
          };
          loops.set(key, loop);
          log.info({ agent: agent.id, runtime: p.runtime, domain: p.domain_id }, 'work loop started');
          wake(loop);
          schedule(loop);
          return statusOf(loop);
        },
        WorkerStartParams,
      );
      ctx.mgmt.register(
        'worker.stop',
        async (params) => {
          const chosen = select((params ?? {}) as WorkerRef);
          if (chosen.length === 0)
            throw new SvcError('not_found', 'no work loop matches: see "svc worker status"');
          for (const l of chosen) stopLoop(l, false);
          return { stopped: chosen.map(statusOf) };
        },
        WorkerRef,
      );
      ctx.mgmt.register('worker.status', async () => ({ loops: [...loops.values()].map(statusOf) }));
    },
    async stop() {
      for (const l of [...loops.values()]) stopLoop(l, true);
    },
    status() {
      return { loops: loops.size, running: [...loops.values()].reduce((n, l) => n + l.running.size, 0) };
    },
  };
}
