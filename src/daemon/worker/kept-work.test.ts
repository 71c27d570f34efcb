import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeTempDir } from '../../../test/support/tmp.js';
import { DIFF_CAP_BYTES, dropEmptyBranch, keepWork } from './kept-work.js';
import { git, prepareWorkdir, removeWorkdir } from './workdir.js';

describe('kept work on the task branch', () => {
  const tmp = makeTempDir('svc-kept-');
  afterAll(() => tmp.remove());
  const env = { PATH: process.env.PATH, HOME: tmp.dir, GIT_CONFIG_NOSYSTEM: '1' };
  const repo = join(tmp.dir, 'repo');
  const work = join(tmp.dir, 'work');
  const g = (dir: string, ...args: string[]) => git(dir, args, env).then((o) => o.trim());
  let base = '';

  beforeAll(async () => {
    mkdirSync(repo);
    await g(repo, 'init', '-q', '-b', 'main');
    writeFileSync(join(repo, 'README.md'), 'hello\n');
    await g(repo, 'add', '-A');
    await g(repo, '-c', 'user.name=t', '-c', 'user.email=t@t', 'commit', '-q', '-m', 'init');
    base = await g(repo, 'rev-parse', 'HEAD');
  });

  it('works on svc/<task_id>, commits what the agent left and measures it against the base', async () => {
    const w = await prepareWorkdir(work, 'mt_1', repo, env);
    expect(w).toEqual({ dir: join(work, 'mt_1'), repository: repo, branch: 'svc/mt_1' });
    expect(await g(w.dir, 'symbolic-ref', '--short', 'HEAD')).toBe('svc/mt_1');
    writeFileSync(join(w.dir, 'README.md'), 'hello\nworld\n');
    writeFileSync(join(w.dir, 'new.txt'), 'a\nb\n');
    const k = await keepWork(w, 'mt_1', 1, env);
    expect(k?.work).toEqual({
      branch: 'svc/mt_1',
      base_commit: base,
      head_commit: await g(repo, 'rev-parse', 'svc/mt_1'),
      files_changed: 2,
      insertions: 3,
      deletions: 0,
    });
    expect(k?.truncated).toBe(false);
    expect(k?.diff).toContain('+++ b/new.txt');
    expect(await g(repo, 'log', '-1', '--format=%an %s', 'svc/mt_1')).toBe(
      'svcd svc: work left uncommitted by task mt_1 (attempt 1)',
    );
    await removeWorkdir(w, env);
    await dropEmptyBranch(w, k?.work ?? null, env);
    expect(existsSync(w.dir)).toBe(false);
    // The directory is gone, the branch with its commit is not.
    expect(await g(repo, 'rev-parse', 'svc/mt_1')).toBe(k?.work.head_commit);
  });

  it('continues a retry from the branch head, or from the base keeping the old head', async () => {
    const again = await prepareWorkdir(work, 'mt_1', repo, env, { retryFrom: 'branch', attempt: 2 });
    expect(existsSync(join(again.dir, 'new.txt'))).toBe(true);
    const head = await g(repo, 'rev-parse', 'svc/mt_1');
    await removeWorkdir(again, env);
    const fresh = await prepareWorkdir(work, 'mt_1', repo, env, { retryFrom: 'base', attempt: 3 });
    expect(existsSync(join(fresh.dir, 'new.txt'))).toBe(false);
    expect(await g(repo, 'rev-parse', 'svc/mt_1')).toBe(base);
    expect(await g(repo, 'rev-parse', 'svc/mt_1-2')).toBe(head);
    await removeWorkdir(fresh, env);
  });

  it('removes a branch the run left without commits, with its directory', async () => {
    const w = await prepareWorkdir(work, 'mt_2', repo, env);
    const k = await keepWork(w, 'mt_2', 1, env);
    expect(k?.work).toMatchObject({ base_commit: base, head_commit: base, files_changed: 0 });
    expect(k?.diff).toBe('');
    await removeWorkdir(w, env);
    await dropEmptyBranch(w, k?.work ?? null, env);
    expect((await git(repo, ['branch', '--list', 'svc/mt_2'], env)).trim()).toBe('');
  });

  it('caps the diff at DIFF_CAP_BYTES, cut at a line, and says so', async () => {
    const w = await prepareWorkdir(work, 'mt_3', repo, env);
    writeFileSync(join(w.dir, 'big.txt'), `${'x'.repeat(99)}\n`.repeat(4000));
    const k = await keepWork(w, 'mt_3', 1, env);
    expect(k?.truncated).toBe(true);
    expect(k?.diff_bytes).toBeGreaterThan(DIFF_CAP_BYTES);
    expect(Buffer.byteLength(k?.diff ?? '')).toBeLessThanOrEqual(DIFF_CAP_BYTES);
    expect(k?.diff.endsWith('\n')).toBe(true);
    expect(k?.work.insertions).toBe(4000);
    await removeWorkdir(w, env);
  });

  it('leaves a plain directory alone', async () => {
    const w = await prepareWorkdir(work, 'mt_4', null, env);
    expect(await keepWork(w, 'mt_4', 1, env)).toBeNull();
    await removeWorkdir(w, env);
  });
});
