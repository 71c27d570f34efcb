// An in-memory MeshWorkApi for task-worker unit tests: pending tasks are claimed first
// come first served, every later call is fenced by the lease, and cancel() makes them 409.
import type {
  Lease,
  MeshWorkApi,
  MissionSettings,
  ProgressReport,
  WorkTask,
} from '../../src/daemon/worker/mesh-api.js';
import type { MissionAgentPolicy } from '../../src/protocol/agent-policy.js';
import { SvcError } from '../../src/protocol/errors.js';
import type { ArtifactCreate } from '../../src/protocol/records.js';

export interface FakeTask {
  task: WorkTask;
  state: 'pending' | 'claimed' | 'running' | 'completed' | 'failed' | 'cancelled';
  lease_id: string | null;
  claimed_by: string | null;
  result: Record<string, unknown> | null;
  failure_reason: string | null;
  progress: ProgressReport[];
  heartbeats: number;
  /** Agents allowed to claim it (assigned); null = any. */
  only_for: string | null;
}

export class FakeMesh implements MeshWorkApi {
  readonly tasks = new Map<string, FakeTask>();
  readonly claims: { agent_id: string; task_id: string | null }[] = [];
  /** Each mission's settings, sent with every start (as the tower does). */
  repositories = new Map<string, string>();
  policies = new Map<string, MissionAgentPolicy>();
  artifacts: ({ id: string; domain_id: string; mission_id: string } & ArtifactCreate)[] = [];
  private leases = 0;
  /** Called after every successful claim (tests hook in here). */
  onClaim: ((t: FakeTask) => void) | null = null;
  /** While set, every claim fails with it (the tower is unreachable or refuses). */
  claimError: Error | null = null;
  /** The next completion or failure commits, then its answer is lost (the replica died). */
  loseAnswer: 'complete' | 'fail' | null = null;

  add(
    id: string,
    description: string,
    opts: { title?: string; lease_seconds?: number; only_for?: string } = {},
  ) {
    const t: FakeTask = {
      task: {
        id,
        mission_id: 'mis_1',
        domain_id: 'dom_1',
        title: opts.title ?? `task ${id}`,
        description,
        attempt: 1,
        lease_seconds: opts.lease_seconds ?? 60,
      },
      state: 'pending',
      lease_id: null,
      claimed_by: null,
      result: null,
      failure_reason: null,
      progress: [],
      heartbeats: 0,
      only_for: opts.only_for ?? null,
    };
    this.tasks.set(id, t);
    return t;
  }

  get(id: string): FakeTask {
    const t = this.tasks.get(id);
    if (!t) throw new Error(`no task ${id}`);
    return t;
  }

  cancel(id: string) {
    const t = this.get(id);
    t.state = 'cancelled';
    t.lease_id = null;
  }

  /** The lease expired: back to pending with the attempt counted. */
  expire(id: string) {
    const t = this.get(id);
    t.state = 'pending';
    t.lease_id = null;
    t.task = { ...t.task, attempt: t.task.attempt + 1 };
  }

  async claim(agentId: string): Promise<Lease | null> {
    if (this.claimError) throw this.claimError;
    for (const t of this.tasks.values()) {
      if (t.state !== 'pending' || (t.only_for !== null && t.only_for !== agentId)) continue;
      t.state = 'claimed';
      t.lease_id = `lease_${++this.leases}`;
      t.claimed_by = agentId;
      this.claims.push({ agent_id: agentId, task_id: t.task.id });
      this.onClaim?.(t);
      return { task: t.task, lease_id: t.lease_id, lease_seconds: t.task.lease_seconds };
    }
    this.claims.push({ agent_id: agentId, task_id: null });
    return null;
  }

  private fenced(taskId: string, leaseId: string, states: FakeTask['state'][]): FakeTask {
    const t = this.get(taskId);
    if (t.lease_id !== leaseId) throw new SvcError('stale_lease', `lease ${leaseId} is not current`);
    if (!states.includes(t.state)) throw new SvcError('illegal_transition', `task is ${t.state}`);
    return t;
  }

  async start(taskId: string, leaseId: string): Promise<MissionSettings> {
    const t = this.fenced(taskId, leaseId, ['claimed']);
    t.state = 'running';
    const missionId = t.task.mission_id;
    return {
      repository: this.repositories.get(missionId) ?? null,
      agent_policy: this.policies.get(missionId) ?? null,
    };
  }
  async heartbeat(taskId: string, leaseId: string) {
    this.fenced(taskId, leaseId, ['claimed', 'running']).heartbeats++;
  }
  async progress(taskId: string, leaseId: string, p: ProgressReport) {
    this.fenced(taskId, leaseId, ['claimed', 'running']).progress.push(p);
  }
  async complete(taskId: string, leaseId: string, result: Record<string, unknown>) {
    const t = this.fenced(taskId, leaseId, ['running']);
    t.state = 'completed';
    t.result = result;
    this.ended(t, 'complete');
  }
  async fail(taskId: string, leaseId: string, reason: string) {
    const t = this.fenced(taskId, leaseId, ['claimed', 'running']);
    t.state = 'failed';
    t.failure_reason = reason;
    this.ended(t, 'fail');
  }
  /** An ended task has no lease (as on the tower); a lost answer throws after the commit. */
  private ended(t: FakeTask, what: 'complete' | 'fail') {
    t.lease_id = null;
    if (this.loseAnswer === what) {
      this.loseAnswer = null;
      throw new SvcError('tower_unreachable', 'the replica went away before answering');
    }
  }
  async state(taskId: string) {
    const t = this.get(taskId);
    return { state: t.state, attempt: t.task.attempt, claimed_by: t.claimed_by };
  }
  async artifact(domainId: string, missionId: string, a: ArtifactCreate): Promise<{ id: string }> {
    const id = `art_${this.artifacts.length + 1}`;
    this.artifacts.push({ id, domain_id: domainId, mission_id: missionId, ...a });
    return { id };
  }
}
