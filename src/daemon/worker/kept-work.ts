// Kept work (docs/worker.md, Branches and artifacts): when a run in a git worktree ends, svcd
// commits what the agent left uncommitted on the task's branch, and measures the branch
// against its base (where it forked from the repository's HEAD): commits, diffstat and the
// diff (capped) for the mission artifact. The branch is never deleted while it has commits.
import type { KeptWork } from '../../protocol/kept-work.js';
import { exec } from '../process/exec.js';
import { git, type TaskWorkdir } from './workdir.js';

export type { KeptWork } from '../../protocol/kept-work.js';

export interface KeptDiff {
  work: KeptWork;
  /** base..head as a unified diff, at most DIFF_CAP_BYTES (cut at a line). */
  diff: string;
  /** Bytes of the whole diff. */
  diff_bytes: number;
  truncated: boolean;
}

/** The diff kept in the artifact: enough to review, small enough for a record. */
export const DIFF_CAP_BYTES = 256 * 1024;

/** Identity of the commits svcd makes (the agent's own commits keep theirs). */
const COMMITTER = ['-c', 'user.name=svcd', '-c', 'user.email=svcd@localhost', '-c', 'commit.gpgsign=false'];

/** Commits leftovers on the task branch and measures it. Null for a plain directory. */
export async function keepWork(
  w: TaskWorkdir,
  taskId: string,
  attempt: number,
  env: NodeJS.ProcessEnv,
): Promise<KeptDiff | null> {
  if (w.repository === null || w.branch === null) return null;
  const dirty = (await git(w.dir, ['status', '--porcelain'], env)).trim() !== '';
  if (dirty) {
    await git(w.dir, ['add', '-A'], env);
    // --no-verify: the repository's hooks are the agent's business, not the bookkeeping's.
    await git(
      w.dir,
      [
        ...COMMITTER,
        'commit',
        '--no-verify',
        '-q',
        '-m',
        `svc: work left uncommitted by task ${taskId} (attempt ${attempt})`,
      ],
      env,
    );
  }
  const head = (await git(w.dir, ['rev-parse', 'HEAD'], env)).trim();
  const repoHead = (await git(w.repository, ['rev-parse', 'HEAD'], env)).trim();
  const base = (await git(w.dir, ['merge-base', repoHead, head], env)).trim();
  const stat = (await git(w.dir, ['diff', '--shortstat', base, head], env)).trim();
  const num = (re: RegExp) => Number(re.exec(stat)?.[1] ?? 0);
  const work: KeptWork = {
    branch: w.branch,
    base_commit: base,
    head_commit: head,
    files_changed: num(/(\d+) files? changed/),
    insertions: num(/(\d+) insertions?\(\+\)/),
    deletions: num(/(\d+) deletions?\(-\)/),
  };
  const full = await git(w.dir, ['diff', '--no-color', '--no-ext-diff', base, head], env);
  const bytes = Buffer.byteLength(full);
  if (bytes <= DIFF_CAP_BYTES) return { work, diff: full, diff_bytes: bytes, truncated: false };
  const cut = Buffer.from(full).subarray(0, DIFF_CAP_BYTES).toString('utf8');
  const atLine = cut.slice(0, cut.lastIndexOf('\n') + 1);
  return { work, diff: atLine, diff_bytes: bytes, truncated: true };
}

/** A branch with no commits beyond its base is removed with its directory; others stay. */
export async function dropEmptyBranch(
  w: TaskWorkdir,
  kept: KeptWork | null,
  env: NodeJS.ProcessEnv,
): Promise<void> {
  if (w.repository === null || w.branch === null || kept === null) return;
  if (kept.head_commit !== kept.base_commit) return;
  await exec(['git', '-C', w.repository, 'branch', '-D', w.branch], env);
}
