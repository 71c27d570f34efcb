// One mesh task through one ephemeral subagent: mark it running, make its working
// directory, run the prompt through the runtime runner (own process group, secrets session,
// timeout, governed permission requests), keep the lease alive, forward progress, keep the
// work left in a git worktree (commit, diff artifact), then report complete or fail with the
// reason and output tail. Does not claim and does not decide what runs next (claim-loop.ts).
import { rm } from 'node:fs/promises';
import type { Clock, TimerHandle } from '../../lib/clock.js';
import { newId } from '../../lib/ids.js';
import type { Logger } from '../../lib/log.js';
import type { DiffArtifactMetadata, KeptWorkResult } from '../../protocol/kept-work.js';
import type { RuntimeKind } from '../../protocol/runtimes.js';
import type { ProgressUpdate } from '../runtimes/progress.js';
import type { RunResult, RuntimeRunner } from '../runtimes/runner.js';
import type { ApprovalsApi, ApprovalWaits } from './approval-waits.js';
import type { CleanupPolicy } from './config-section.js';
import { dropEmptyBranch, type KeptDiff, keepWork } from './kept-work.js';
import {
  isLeaseLost,
  type Lease,
  type MeshWorkApi,
  type MissionSettings,
  type ProgressReport,
} from './mesh-api.js';
import { type GovernedPermission, governedPermission } from './permission.js';
import { effectivePolicy } from './policy.js';
import type { AgentPolicyConfig } from './policy-section.js';
import { prepareWorkdir, type RetryFrom, removeWorkdir, type TaskWorkdir } from './workdir.js';

/** Why a run was stopped from outside; the AbortSignal's reason. */
export type StopReason = 'cancelled' | 'lease_lost' | 'shutdown';

export type SubagentOutcome =
  | { task_id: string; state: 'completed'; run: RunResult }
  | { task_id: string; state: 'failed'; reason: string; run: RunResult | null }
  /** Cancelled on the tower: stopped, nothing reported (the task is already cancelled). */
  | { task_id: string; state: 'cancelled'; run: RunResult | null }
  /** The lease is gone, the worker stopped, or the tower did not take the report
   *  ("unreported"): the tower's lease sweep decides what happens to the task. */
  | { task_id: string; state: 'abandoned'; reason: string; run: RunResult | null };

export interface SubagentDeps {
  runtimes: RuntimeRunner;
  api: MeshWorkApi;
  clock: Clock;
  log: Logger;
  /** $SVC_HOME/work */
  workRoot: string;
  /** Environment for git (worktrees). */
  env: NodeJS.ProcessEnv;
  timeoutMs: number;
  cleanup: CleanupPolicy;
  /** Delay between retries of a report the tower did not take (transient errors). */
  retryMs?: number;
  /** Where a retry's git worktree starts ([worker] retry_from). */
  retryFrom?: RetryFrom;
  /** Governed permission requests (ACP runtimes); without it every request is allowed. */
  governance?: {
    approvals: ApprovalsApi;
    waits: ApprovalWaits;
    policy: AgentPolicyConfig;
  };
}

export interface SubagentJob {
  lease: Lease;
  /** The enrolled agent the run is for (secrets grants are per agent). */
  agentId: string;
  runtime: RuntimeKind;
  /** Abort with a StopReason to stop the run. */
  signal: AbortSignal;
  /** The subagent started (for recovery after an svcd crash). */
  onSpawn?(runId: string, pgid: number): void;
}

/** Failure reasons carry at most this much of the output tail. */
const REASON_TAIL_CHARS = 2000;
/** Reports that hit transient errors are retried this many times. */
const REPORT_ATTEMPTS = 5;

export function taskPrompt(t: { title: string; description: string }): string {
  return t.description.trim() === '' ? t.title : `${t.title}\n\n${t.description}`;
}

export function failureReason(failure: string, outputTail: string): string {
  const tail = outputTail.trim();
  if (tail === '') return failure;
  const clipped = tail.length > REASON_TAIL_CHARS ? `…${tail.slice(tail.length - REASON_TAIL_CHARS)}` : tail;
  return `${failure}\n--- output tail ---\n${clipped}`;
}

export function progressMessage(u: ProgressUpdate): ProgressReport {
  return {
    message: u.text ?? u.kind,
    data: { kind: u.kind, ...(u.data ?? {}) },
  };
}

export async function runSubagent(deps: SubagentDeps, job: SubagentJob): Promise<SubagentOutcome> {
  const { task, lease_id: leaseId } = job.lease;
  const log = deps.log.child({ task_id: task.id, lease_id: leaseId });
  const retryMs = deps.retryMs ?? 1000;
  const stopped = new AbortController();
  const stopWith = (r: StopReason) => {
    if (!stopped.signal.aborted) stopped.abort(r);
  };
  const onOuterAbort = () => stopWith((job.signal.reason as StopReason) ?? 'shutdown');
  job.signal.addEventListener('abort', onOuterAbort, { once: true });
  if (job.signal.aborted) onOuterAbort();

  const abandoned = (run: RunResult | null): SubagentOutcome => {
    // Not aborted: the tower did not take a report (transient errors past the retries).
    const reason = stopped.signal.aborted ? (stopped.signal.reason as StopReason) : 'unreported';
    return reason === 'cancelled'
      ? { task_id: task.id, state: 'cancelled', run }
      : { task_id: task.id, state: 'abandoned', reason, run };
  };

  /**
   * A report to the tower: retried on transient errors; a lost lease stops the run. A
   * completion or failure whose answer was lost (its replica died after the commit) finds the
   * lease gone when retried: if the task stands as reported, for this agent and attempt, the
   * report took effect.
   */
  async function report(
    what: string,
    call: () => Promise<void>,
    ends?: 'completed' | 'failed',
  ): Promise<boolean> {
    let unanswered = false;
    for (let i = 1; ; i++) {
      try {
        await call();
        return true;
      } catch (e) {
        if (isLeaseLost(e)) {
          if (unanswered && ends !== undefined && (await tookEffect(ends))) return true;
          log.info({ err: e, what }, 'lease lost');
          stopWith('lease_lost');
          return false;
        }
        unanswered = true;
        if (i >= REPORT_ATTEMPTS) {
          log.warn({ err: e, what }, 'tower did not take the report; the lease will expire');
          return false;
        }
        await deps.clock.sleep(retryMs * i);
      }
    }
  }

  async function tookEffect(ends: 'completed' | 'failed'): Promise<boolean> {
    try {
      const t = await deps.api.state(task.id);
      return t.state === ends && t.attempt === task.attempt && t.claimed_by === job.agentId;
    } catch (e) {
      log.warn({ err: e }, 'cannot read the task after a lost answer');
      return false;
    }
  }

  let workdir: TaskWorkdir | null = null;
  let heartbeat: TimerHandle | null = null;
  let progressChain: Promise<unknown> = Promise.resolve();
  const sendProgress = (p: ProgressReport) => {
    progressChain = progressChain.then(() =>
      deps.api.progress(task.id, leaseId, p).catch((e: unknown) => {
        if (isLeaseLost(e)) stopWith('lease_lost');
        else log.debug({ err: e }, 'progress not delivered');
      }),
    );
  };
  let run: RunResult | null = null;
  let kept: KeptDiff | null = null;
  /** Commits what the run left, stores the diff artifact; the result's fields for it. */
  async function keep(w: TaskWorkdir): Promise<Record<string, unknown>> {
    try {
      kept = await keepWork(w, task.id, task.attempt, deps.env);
    } catch (e) {
      log.warn({ err: e }, 'cannot keep the work of the run');
      return { kept_work_error: (e as Error).message };
    }
    if (kept === null) return {};
    const k: KeptDiff = kept;
    const fields: KeptWorkResult = { ...k.work };
    const metadata: DiffArtifactMetadata = {
      kind: 'diff',
      task_id: task.id,
      ...k.work,
      truncated: k.truncated,
      diff: k.diff,
    };
    try {
      const a = await deps.api.artifact(task.domain_id, task.mission_id, {
        name: `diff of ${k.work.branch} (attempt ${task.attempt})`.slice(0, 200),
        content_type: 'text/x-diff',
        size_bytes: k.diff_bytes,
        metadata,
      });
      fields.diff_artifact_id = a.id;
      fields.diff_truncated = k.truncated;
    } catch (e) {
      log.warn({ err: e }, 'cannot store the diff artifact');
    }
    return fields;
  }
  try {
    // Set in the report's callback (the `as`: no narrowing to null at the declaration).
    let mission = null as MissionSettings | null;
    const started = await report('start', async () => {
      mission = await deps.api.start(task.id, leaseId);
    });
    if (!started || mission === null) return abandoned(null);
    if (stopped.signal.aborted) return abandoned(null);
    const settings: MissionSettings = mission;

    const every = Math.max(1000, Math.floor((job.lease.lease_seconds * 1000) / 3));
    const beat = () => {
      heartbeat = deps.clock.setTimeout(() => {
        deps.api.heartbeat(task.id, leaseId).then(
          () => {
            if (!stopped.signal.aborted) beat();
          },
          (e: unknown) => {
            if (isLeaseLost(e)) {
              log.info({ err: e }, 'lease lost on heartbeat; stopping the subagent');
              stopWith('lease_lost');
            } else {
              log.warn({ err: e }, 'heartbeat failed; retrying at the next beat');
              if (!stopped.signal.aborted) beat();
            }
          },
        );
      }, every);
    };
    beat();

    try {
      workdir = await prepareWorkdir(deps.workRoot, task.id, settings.repository, deps.env, {
        retryFrom: deps.retryFrom ?? 'branch',
        attempt: task.attempt,
      });
    } catch (e) {
      const reason = `cannot prepare the working directory: ${(e as Error).message}`;
      await report('fail', () => deps.api.fail(task.id, leaseId, reason));
      return { task_id: task.id, state: 'failed', reason, run: null };
    }

    const runId = newId('run', deps.clock.now());
    sendProgress({
      message: `subagent started (${job.runtime}, attempt ${task.attempt})`,
      data: {
        kind: 'started',
        run_id: runId,
        runtime: job.runtime,
        workdir: workdir.dir,
        ...(workdir.branch ? { branch: workdir.branch } : {}),
      },
    });
    const g = deps.governance;
    const governed: GovernedPermission | null = g
      ? governedPermission(
          { approvals: g.approvals, waits: g.waits, progress: sendProgress, log },
          {
            task,
            agentId: job.agentId,
            workdir: workdir.dir,
            policy: effectivePolicy(g.policy, settings.agent_policy),
            approvalTimeoutMs: g.policy.approvalTimeoutMs,
          },
        )
      : null;
    run = await deps.runtimes.run({
      runtime: job.runtime,
      prompt: taskPrompt(task),
      workdir: workdir.dir,
      agentId: job.agentId,
      taskId: task.id,
      runId,
      logFile: `${workdir.dir}.log`,
      timeoutMs: deps.timeoutMs,
      signal: stopped.signal,
      onProgress: (u) => sendProgress(progressMessage(u)),
      onSpawn: (pgid) => job.onSpawn?.(runId, pgid),
      ...(governed ? { permission: governed.handler } : {}),
    });
    await progressChain;
    if (stopped.signal.aborted) return abandoned(run);
    const keptFields = await keep(workdir);
    const approvals = governed?.asked.length ? { approvals: governed.asked } : {};
    if (run.ok) {
      const result = {
        summary: run.summary,
        run_id: run.run_id,
        runtime: run.runtime,
        exit_code: run.exit_code,
        stop_reason: run.stop_reason,
        duration_ms: run.duration_ms,
        ...keptFields,
        ...approvals,
      };
      const ok = await report('complete', () => deps.api.complete(task.id, leaseId, result), 'completed');
      if (!ok) return abandoned(run);
      return { task_id: task.id, state: 'completed', run };
    }
    const reason = failureReason(
      [run.failure ?? 'failed', ...failureNotes(keptFields, governed)].join('\n'),
      run.output_tail,
    );
    const ok = await report('fail', () => deps.api.fail(task.id, leaseId, reason), 'failed');
    if (!ok) return abandoned(run);
    return { task_id: task.id, state: 'failed', reason, run };
  } finally {
    (heartbeat as TimerHandle | null)?.cancel();
    stopWith('shutdown'); // ends the heartbeat chain if a beat is in flight
    job.signal.removeEventListener('abort', onOuterAbort);
    await progressChain;
    if (workdir !== null) {
      const keepDir = deps.cleanup === 'never' || (deps.cleanup === 'on_success' && !(run?.ok ?? false));
      if (!keepDir) {
        await removeWorkdir(workdir, deps.env).catch((e: unknown) =>
          log.warn({ err: e, dir: workdir?.dir }, 'cannot remove the working directory'),
        );
        await dropEmptyBranch(workdir, (kept as KeptDiff | null)?.work ?? null, deps.env);
        await rm(`${workdir.dir}.log`, { force: true });
      }
    }
  }
}

/** Lines a failure reason carries about kept work and refused approvals. */
function failureNotes(kept: Record<string, unknown>, governed: GovernedPermission | null): string[] {
  const notes: string[] = [];
  if (typeof kept.branch === 'string')
    notes.push(`work kept on branch ${kept.branch} (head ${String(kept.head_commit).slice(0, 12)})`);
  for (const a of governed?.asked ?? []) {
    if (a.status === 'rejected')
      notes.push(`approval ${a.approval_id} (${a.kind}: ${a.title}) rejected: ${a.reason ?? 'no reason'}`);
  }
  return notes;
}
