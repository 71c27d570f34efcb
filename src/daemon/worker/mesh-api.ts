// What the task worker needs from the tower's mesh tasks (docs/mesh.md), as a small
// interface: the claim loop and the subagent executor take it, tests pass an in-memory
// fake, and tower-mesh.ts implements it over the node's tower client.
import type { MissionRunSettings } from '../../protocol/mesh.js';
import type { ArtifactCreate } from '../../protocol/records.js';

/** The fields of a mesh task the worker reads (the tower's MeshTask has these and more). */
export interface WorkTask {
  id: string;
  mission_id: string;
  domain_id: string;
  title: string;
  description: string;
  attempt: number;
  lease_seconds: number;
}

/** Where a task stands on the tower (MeshTask's fields the worker reads after a lost answer). */
export interface TaskStanding {
  state: string;
  attempt: number;
  claimed_by: string | null;
}

/** A successful claim: the task and the lease every later call must carry (fencing). */
export interface Lease {
  task: WorkTask;
  lease_id: string;
  lease_seconds: number;
}

export interface ProgressReport {
  message: string;
  percent?: number;
  data?: Record<string, unknown>;
}

/**
 * Calls on a claimed task fail with SvcError stale_lease / illegal_transition (409) once the
 * lease is no longer ours (expired and reclaimed, or the task was cancelled); other errors
 * (tower_unreachable, unavailable) are transient.
 */
export interface MeshWorkApi {
  /** One claim for this enrolled agent (capabilities, assigned, broadcast are the tower's). */
  claim(agentId: string): Promise<Lease | null>;
  /** claimed → running; resolves with what the run needs of the task's mission. */
  start(taskId: string, leaseId: string): Promise<MissionSettings>;
  heartbeat(taskId: string, leaseId: string): Promise<void>;
  progress(taskId: string, leaseId: string, p: ProgressReport): Promise<void>;
  complete(taskId: string, leaseId: string, result: Record<string, unknown>): Promise<void>;
  fail(taskId: string, leaseId: string, reason: string): Promise<void>;
  /** Where the task stands on the tower now: whether a report whose answer was lost (the
   * replica died after its commit) took effect. */
  state(taskId: string): Promise<TaskStanding>;
  /** Stores a mission artifact (a run's diff); resolves with its id. */
  artifact(domainId: string, missionId: string, a: ArtifactCreate): Promise<{ id: string }>;
}

/** What a run needs of its mission: the repository (a local path for a git worktree, or
 *  null) and the permission policy override. The tower sends it in the start answer. */
export type MissionSettings = MissionRunSettings;

/** True when an error means the lease is gone (the task is no longer ours to report on). */
export function isLeaseLost(e: unknown): boolean {
  const code = (e as { code?: unknown } | null)?.code;
  return (
    code === 'stale_lease' || code === 'illegal_transition' || code === 'conflict' || code === 'not_found'
  );
}
