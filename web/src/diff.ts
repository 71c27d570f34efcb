// How the console reads a unified diff (a task's kept work): each line with its kind, for
// colouring. Pure (tested in diff.test.ts).

export type DiffLineKind = 'file' | 'meta' | 'hunk' | 'add' | 'del' | 'context';

export interface DiffLine {
  kind: DiffLineKind;
  text: string;
}

const HUNK = /^@@ -\d+(?:,(\d+))? \+\d+(?:,(\d+))? @@/;

/**
 * `git diff` output, line by line. Hunk lines are counted from their `@@` header, so a removed
 * line reading `-- x` or an added `++ y` is a change, not a file header.
 */
export function diffLines(diff: string): DiffLine[] {
  if (diff === '') return [];
  const lines = (diff.endsWith('\n') ? diff.slice(0, -1) : diff).split('\n');
  let oldLeft = 0;
  let newLeft = 0;
  return lines.map((text): DiffLine => {
    if (oldLeft > 0 || newLeft > 0) {
      const c = text[0];
      if (c === '+' && newLeft > 0) {
        newLeft--;
        return { kind: 'add', text };
      }
      if (c === '-' && oldLeft > 0) {
        oldLeft--;
        return { kind: 'del', text };
      }
      if ((c === ' ' || text === '') && oldLeft > 0 && newLeft > 0) {
        oldLeft--;
        newLeft--;
        return { kind: 'context', text };
      }
    }
    const h = HUNK.exec(text);
    if (h) {
      oldLeft = Number(h[1] ?? 1);
      newLeft = Number(h[2] ?? 1);
      return { kind: 'hunk', text };
    }
    // diff --git …, index …, new file mode …, ---/+++ …, \ No newline at end of file, Binary …
    return { kind: text.startsWith('diff --git ') ? 'file' : 'meta', text };
  });
}
