import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { makeTempDir } from '../../../test/support/tmp.js';
import { localRepository, prepareWorkdir, removeWorkdir } from './workdir.js';

describe('task working directories', () => {
  const tmp = makeTempDir('svc-workdir-');
  afterAll(() => tmp.remove());
  const env = { PATH: process.env.PATH };

  it('refuses task ids that could escape the work root', async () => {
    for (const id of ['../x', '.hidden', 'a/b', '']) {
      await expect(prepareWorkdir(tmp.dir, id, null, env)).rejects.toMatchObject({ code: 'bad_request' });
    }
  });

  it('makes a plain directory when the repository is not a local path', async () => {
    expect(localRepository('https://example.com/r.git')).toBeNull();
    expect(localRepository(join(tmp.dir, 'missing'))).toBeNull();
    expect(localRepository(tmp.dir)).toBe(tmp.dir);
    const w = await prepareWorkdir(tmp.dir, 'mt_1', 'https://example.com/r.git', env);
    expect(w).toEqual({ dir: join(tmp.dir, 'mt_1'), repository: null, branch: null });
    expect(existsSync(w.dir)).toBe(true);
    await removeWorkdir(w, env);
    expect(existsSync(w.dir)).toBe(false);
  });

  it('says why a worktree cannot be made of a directory that is not a repository', async () => {
    await expect(prepareWorkdir(join(tmp.dir, 'w'), 'mt_2', tmp.dir, env)).rejects.toThrow(
      /cannot make a git worktree of .* for task mt_2/,
    );
  });
});
