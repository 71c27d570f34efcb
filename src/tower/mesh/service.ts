// The mesh area's facade (docs/mesh.md): every mesh task operation by name, for the REST
// routes, POST /mcp/call and the composition root. It holds the dependencies and the store
// chosen for the dialect, and delegates; each operation lives in its own module.
import type { Clock } from '../../lib/clock.js';
import type { Logger } from '../../lib/log.js';
import type { Claimed, MeshState, MeshTask, MeshTaskCreate, StartedTask } from '../../protocol/mesh.js';
import type { Principal } from '../auth/principal.js';
import type { Write } from '../store/tx.js';
import type { Db, Dialect } from '../store/types.js';
import { cancelTask } from './cancel.js';
import { claimTasks } from './claim.js';
import { type CompleteItem, type CompleteOutcome, completeTask, completeTasks } from './complete.js';
import { createTask } from './create.js';
import { failTask } from './fail.js';
import { heartbeatTask } from './heartbeat.js';
import type { MeshDeps, MeshHooks, MeshStore } from './mesh-store.js';
import { createPostgresMeshStore } from './postgres/store.js';
import { type ProgressUpdate, reportProgress } from './progress.js';
import { getTask, listTasks } from './read.js';
import { retryTask } from './retry.js';
import { createSqliteMeshStore } from './sqlite/store.js';
import { startTask } from './start.js';
import { sweepLeases } from './sweep.js';
import { startSweeper } from './sweeper.js';

export type { CompleteOutcome } from './complete.js';
export type { MeshHooks } from './mesh-store.js';

export interface MeshOptions {
  dialect: Dialect;
  db: Db;
  write: Write;
  clock: Clock;
  log: Logger;
  hooks?: MeshHooks;
  /** PostgreSQL: lease-holding statements of one kind under way at once (default 4). */
  inFlight?: number;
}

/** One store implementation per dialect, chosen once (createMeshService). */
const STORES: Record<Dialect, (o: MeshOptions) => MeshStore> = {
  sqlite: (o) => createSqliteMeshStore({ write: o.write }),
  postgres: (o) =>
    createPostgresMeshStore({
      write: o.write,
      clock: o.clock,
      ...(o.inFlight !== undefined ? { maxInFlight: o.inFlight } : {}),
    }),
};

export function createMeshService(opts: MeshOptions): MeshService {
  const store = STORES[opts.dialect](opts);
  return new MeshService(
    { db: opts.db, write: opts.write, store, hooks: opts.hooks ?? {} },
    { clock: opts.clock, log: opts.log },
  );
}

export class MeshService {
  constructor(
    private readonly deps: MeshDeps,
    private readonly loop: { clock: Clock; log: Logger },
  ) {}

  get(p: Principal, taskId: string): Promise<MeshTask> {
    return getTask(this.deps, p, taskId);
  }

  list(
    p: Principal,
    missionId: string,
    q: { state?: MeshState; limit: number; after: string | null },
  ): Promise<MeshTask[]> {
    return listTasks(this.deps, p, missionId, q);
  }

  create(p: Principal, missionId: string, body: MeshTaskCreate): Promise<MeshTask> {
    return createTask(this.deps, p, missionId, body);
  }

  /** The best task `agentId` may take, or null when none is claimable. */
  async claim(p: Principal, agentId: string, missionId?: string): Promise<Claimed | null> {
    return (await this.claimMany(p, agentId, missionId, 1))[0] ?? null;
  }

  /** Up to `max` tasks for one agent at once (each with its own lease), best first. */
  async claimMany(
    p: Principal,
    agentId: string,
    missionId: string | undefined,
    max: number,
  ): Promise<Claimed[]> {
    const started = this.loop.clock.now();
    const claims = await claimTasks(this.deps, p, agentId, missionId, max);
    this.deps.hooks.onClaimed?.(claims, (this.loop.clock.now() - started) / 1000);
    return claims;
  }

  /** claimed → running; with the mission's run settings (repository, permission policy). */
  start(p: Principal, taskId: string, leaseId: string): Promise<StartedTask> {
    return startTask(this.deps, p, taskId, leaseId);
  }

  heartbeat(p: Principal, taskId: string, leaseId: string): Promise<{ lease_expires_at: string }> {
    return heartbeatTask(this.deps, p, taskId, leaseId);
  }

  progress(p: Principal, taskId: string, leaseId: string, update: ProgressUpdate): Promise<void> {
    return reportProgress(this.deps, p, taskId, leaseId, update);
  }

  complete(p: Principal, taskId: string, leaseId: string, result: unknown): Promise<MeshTask> {
    return completeTask(this.deps, p, taskId, leaseId, result).then((t) => this.finished(t));
  }

  /** Several completions, each on its own lease with its own outcome. */
  async completeMany(p: Principal, items: CompleteItem[]): Promise<CompleteOutcome[]> {
    const outcomes = await completeTasks(this.deps, p, items);
    this.deps.hooks.onFinished?.('completed', outcomes.filter((o) => o.ok).length);
    return outcomes;
  }

  fail(p: Principal, taskId: string, leaseId: string, reason: string): Promise<MeshTask> {
    return failTask(this.deps, p, taskId, leaseId, reason).then((t) => this.finished(t));
  }

  retry(p: Principal, taskId: string): Promise<MeshTask> {
    return retryTask(this.deps, p, taskId);
  }

  cancel(p: Principal, taskId: string): Promise<MeshTask> {
    return cancelTask(this.deps, p, taskId).then((t) => this.finished(t));
  }

  /** Tells the metrics hook a task reached a final state; returns the task. */
  private finished(t: MeshTask): MeshTask {
    if (t.state === 'completed' || t.state === 'failed' || t.state === 'cancelled') {
      this.deps.hooks.onFinished?.(t.state);
    }
    return t;
  }

  /** Expired leases back to pending (or failed past max_attempts); how many were swept. */
  sweep(): Promise<number> {
    return sweepLeases(this.deps);
  }

  /** Sweeps every second until the function returned is called (it waits for a sweep under way). */
  startSweeper(): () => Promise<void> {
    return startSweeper({ sweep: () => this.sweep(), ...this.loop });
  }
}
