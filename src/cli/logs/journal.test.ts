import { chmodSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { makeTempDir } from '../../../test/support/tmp.js';
import { readJournal } from './journal.js';

/** A journalctl on PATH that prints its arguments and two lines, or fails with `exit`. */
function fakeJournalctl(dir: string, exit = 0): NodeJS.ProcessEnv {
  const script = join(dir, 'journalctl');
  writeFileSync(
    script,
    `#!/bin/sh\necho "args: $*"\nprintf '{"level":30,"time":1,"msg":"from the journal"}\\nno newline'\n${exit ? `echo "No journal files were found." >&2\nexit ${exit}\n` : ''}`,
  );
  chmodSync(script, 0o755);
  return { PATH: `${dir}:/usr/bin:/bin` };
}

describe('reading the journal', () => {
  let tmp: ReturnType<typeof makeTempDir>;
  afterEach(() => tmp?.remove());
  const query = { unit: 'svcd.service', lines: 5, since: null, follow: false };

  it('emits journalctl output line by line, the last line without a newline included', async () => {
    tmp = makeTempDir();
    const lines: string[] = [];
    await readJournal(query, fakeJournalctl(tmp.dir), (l) => lines.push(l), new AbortController().signal);
    expect(lines).toEqual([
      'args: --user --unit svcd.service --output cat --no-pager --lines 5',
      '{"level":30,"time":1,"msg":"from the journal"}',
      'no newline',
    ]);
  });

  it('fails as unavailable with what journalctl said, or when it is not installed', async () => {
    tmp = makeTempDir();
    const signal = new AbortController().signal;
    await expect(readJournal(query, fakeJournalctl(tmp.dir, 1), () => {}, signal)).rejects.toMatchObject({
      code: 'unavailable',
      message: expect.stringContaining('failed (1): No journal files were found.'),
    });
    await expect(
      readJournal(query, { PATH: tmp.dir.concat('/none') }, () => {}, signal),
    ).rejects.toMatchObject({
      code: 'unavailable',
      message: 'svcd.service logs to the journal, and journalctl is not installed',
    });
  });
});
