// [worker] table of config.toml (docs/worker.md): claim-loop and subagent defaults.
// `svc run --max-concurrent` overrides max_concurrent per loop.
import type { ConfigSection } from '../config/section.js';
import type { RetryFrom } from './workdir.js';

export const CLEANUP_CHOICES = ['always', 'on_success', 'never'] as const;
export type CleanupPolicy = (typeof CLEANUP_CHOICES)[number];

export interface WorkerConfig {
  /** Subagents one loop runs at once, when `svc run` does not say. */
  maxConcurrent: number;
  /** The backstop poll between task_ready wake-ups. */
  pollMs: number;
  /** A subagent running longer is killed and its task failed ("timed out after …"). */
  taskTimeoutMs: number;
  /** When a task's working directory is removed after its run. */
  cleanup: CleanupPolicy;
  /** Where a retried task's git worktree starts: its branch's head, or the repository's HEAD. */
  retryFrom: RetryFrom;
}

export const workerSection: ConfigSection<WorkerConfig> = {
  parse(t) {
    t?.onlyKeys(['max_concurrent', 'poll_interval', 'task_timeout', 'cleanup', 'retry_from']);
    return {
      maxConcurrent: t?.integer('max_concurrent', 1, 256) ?? 3,
      pollMs: t?.duration('poll_interval') ?? 30_000,
      taskTimeoutMs: t?.duration('task_timeout') ?? 60 * 60_000,
      cleanup: t?.oneOf('cleanup', CLEANUP_CHOICES) ?? 'on_success',
      retryFrom: t?.oneOf('retry_from', ['branch', 'base'] as const) ?? 'branch',
    };
  },
};
