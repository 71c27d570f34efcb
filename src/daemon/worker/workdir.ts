// A task's working directory, $SVC_HOME/work/<task_id>: a fresh empty directory, or a git
// worktree of the mission's repository when it names a local path, on the task's branch
// svc/<task_id> (kept-work.ts records what the run left there). A leftover directory of an
// earlier attempt is replaced; the branch is not: a retry continues from its head, or (retry
// from "base") starts again at the repository's HEAD with the old head kept as svc/<id>-<n>.
import { existsSync, statSync } from 'node:fs';
import { mkdir, rm } from 'node:fs/promises';
import { isAbsolute, join } from 'node:path';
import { SvcError } from '../../protocol/errors.js';
import { exec } from '../process/exec.js';

export interface TaskWorkdir {
  dir: string;
  /** The repository the worktree belongs to; null for a plain directory. */
  repository: string | null;
  /** The task's branch (svc/<task_id>) in the repository; null for a plain directory. */
  branch: string | null;
}

/** Where a retry's worktree starts: the task branch's head (default) or the repository's HEAD. */
export type RetryFrom = 'branch' | 'base';

/** Task ids become directory and branch names: only ids that cannot escape are accepted. */
function safeName(taskId: string): string {
  if (!/^[A-Za-z0-9_-]{1,128}$/.test(taskId)) {
    throw new SvcError('bad_request', `task id "${taskId}" cannot name a working directory`);
  }
  return taskId;
}

export function taskBranch(taskId: string): string {
  return `svc/${safeName(taskId)}`;
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

export async function git(repo: string, args: string[], env: NodeJS.ProcessEnv): Promise<string> {
  const r = await exec(['git', '-C', repo, ...args], env);
  if (r.code !== 0) throw new Error((r.stderr || r.stdout).trim() || `git ${args[0]} failed`);
  return r.stdout;
}

async function branchExists(repo: string, branch: string, env: NodeJS.ProcessEnv): Promise<boolean> {
  const r = await exec(['git', '-C', repo, 'rev-parse', '--verify', '--quiet', `refs/heads/${branch}`], env);
  return r.code === 0;
}

export async function prepareWorkdir(
  workRoot: string,
  taskId: string,
  repository: string | null,
  env: NodeJS.ProcessEnv,
  opts: { retryFrom?: RetryFrom; attempt?: number } = {},
): Promise<TaskWorkdir> {
  const dir = join(workRoot, safeName(taskId));
  const repo = localRepository(repository);
  await removeWorkdir({ dir, repository: repo, branch: null }, env);
  if (repo === null) {
    await mkdir(dir, { recursive: true, mode: 0o700 });
    return { dir, repository: null, branch: null };
  }
  const branch = taskBranch(taskId);
  try {
    if (!(await branchExists(repo, branch, env))) {
      await git(repo, ['worktree', 'add', '-b', branch, dir, 'HEAD'], env);
    } else if ((opts.retryFrom ?? 'branch') === 'branch') {
      await git(repo, ['worktree', 'add', dir, branch], env);
    } else {
      // Starting again from the base: the earlier attempt's work stays on its own branch.
      await git(repo, ['branch', '-f', `${branch}-${(opts.attempt ?? 2) - 1}`, branch], env);
      await git(repo, ['worktree', 'add', '-B', branch, dir, 'HEAD'], env);
    }
  } catch (e) {
    throw new SvcError(
      'internal',
      `cannot make a git worktree of ${repo} for task ${taskId}: ${(e as Error).message}`,
    );
  }
  return { dir, repository: repo, branch };
}

/** Removes the directory (and the worktree's registration); never the branch. */
export async function removeWorkdir(w: TaskWorkdir, env: NodeJS.ProcessEnv): Promise<void> {
  if (w.repository !== null) {
    // Unregisters the worktree too; a missing one is fine (prune drops stale entries).
    await exec(['git', '-C', w.repository, 'worktree', 'remove', '--force', w.dir], env);
    await exec(['git', '-C', w.repository, 'worktree', 'prune'], env);
  }
  if (existsSync(w.dir)) await rm(w.dir, { recursive: true, force: true });
}
