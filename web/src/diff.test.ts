import { describe, expect, it } from 'vitest';
import { diffLines } from './diff.js';

describe('console diff reading', () => {
  it('tells file headers, hunks, added, removed and context lines apart', () => {
    const diff = [
      'diff --git a/notes.txt b/notes.txt',
      'new file mode 100644',
      'index 0000000..1f2a3b4',
      '--- /dev/null',
      '+++ b/notes.txt',
      '@@ -0,0 +1 @@',
      '+governed',
      'diff --git a/README.md b/README.md',
      'index 1f2a3b4..5e6f7a8 100644',
      '--- a/README.md',
      '+++ b/README.md',
      '@@ -1,3 +1,3 @@',
      ' hello',
      '--- old line',
      '+++ new line',
      '\\ No newline at end of file',
      '',
    ].join('\n');
    expect(diffLines(diff).map((l) => l.kind)).toEqual([
      'file',
      'meta',
      'meta',
      'meta',
      'meta',
      'hunk',
      'add',
      'file',
      'meta',
      'meta',
      'meta',
      'hunk',
      'context',
      // Inside a hunk, counted from its header: a change whose text starts with -- or ++.
      'del',
      'add',
      'meta',
    ]);
    expect(diffLines(diff)[6]).toEqual({ kind: 'add', text: '+governed' });
  });

  it('reads an empty line inside a hunk as context (editors strip the space)', () => {
    expect(diffLines('@@ -1,2 +1,2 @@\n\n-a\n+b\n').map((l) => l.kind)).toEqual([
      'hunk',
      'context',
      'del',
      'add',
    ]);
  });

  it('reads an empty diff as no lines', () => {
    expect(diffLines('')).toEqual([]);
  });
});
