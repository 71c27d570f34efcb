// A task's working directory, $SVC_HOME/work/<task_id>: a fresh empty directory, or a git
// worktree (detached at HEAD) of the mission's repository when it names a local path. A
// leftover directory of an earlier attempt is replaced, so every attempt starts clean.
import { existsSync, statSync } from 'node:fs';
import { mkdir, rm } from 'node:fs/promises';
import { isAbsolute, join } from 'node:path';
import { SvcError } from '../../protocol/errors.js';
import { exec } from '../process/exec.js';

export interface TaskWorkdir {
  dir: string;
  /** The repository the worktree belongs to; null for a plain directory. */
  repository: string | null;
}

/** Task ids become directory names: only ids that cannot escape workRoot are accepted. */
function safeName(taskId: string): string {
  if (!/^[A-Za-z0-9_.-]{1,128}$/.test(taskId) || taskId.startsWith('.')) {
    throw new SvcError('bad_request', `task id "${taskId}" cannot name a working directory`);
  }
  return taskId;
}

/** A mission repository the worker can make a worktree of: an existing local directory. */
export function localRepository(repository: string | null): string | null {
  if (!repository || !isAbsolute(repository)) return null;
  try {
    return statSync(repository).isDirectory() ? repository : null;
  } catch {
    return null;
  }
}

export async function prepareWorkdir(
  workRoot: string,
  taskId: string,
  repository: string | null,
  env: NodeJS.ProcessEnv,
): Promise<TaskWorkdir> {
  const dir = join(workRoot, safeName(taskId));
  const repo = localRepository(repository);
  await removeWorkdir({ dir, repository: repo }, env);
  if (repo === null) {
    await mkdir(dir, { recursive: true, mode: 0o700 });
    return { dir, repository: null };
  }
  const r = await exec(['git', '-C', repo, 'worktree', 'add', '--detach', dir, 'HEAD'], env);
  if (r.code !== 0) {
    throw new SvcError(
      'internal',
      `cannot make a git worktree of ${repo} for task ${taskId}: ${(r.stderr || r.stdout).trim()}`,
    );
  }
  return { dir, repository: repo };
}

export async function removeWorkdir(w: TaskWorkdir, env: NodeJS.ProcessEnv): Promise<void> {
  if (w.repository !== null) {
    // Unregisters the worktree too; a missing one is fine (prune drops stale entries).
    await exec(['git', '-C', w.repository, 'worktree', 'remove', '--force', w.dir], env);
    await exec(['git', '-C', w.repository, 'worktree', 'prune'], env);
  }
  if (existsSync(w.dir)) await rm(w.dir, { recursive: true, force: true });
}
