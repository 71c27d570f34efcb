import { describe, expect, it } from 'vitest';
import { lineTime, TailWindow } from './window.js';

const pino = (time: number, msg: string) => JSON.stringify({ level: 30, time, msg });
const mark = (time: number, text: string) => `--- ${new Date(time).toISOString()} ${text}`;

function run(n: number, since: number | null, files: { lines: string[]; mtime: number }[]): string[] {
  const w = new TailWindow(n, since);
  for (const f of files) {
    for (const l of f.lines) w.line(l);
    w.endOfFile(f.mtime);
  }
  return w.lines();
}

describe('lineTime', () => {
  it('reads pino times and svcd marks, nothing else', () => {
    expect(lineTime(pino(1234, 'x'))).toBe(1234);
    expect(lineTime(mark(Date.UTC(2026, 0, 1), 'started pid 7'))).toBe(Date.UTC(2026, 0, 1));
    expect(lineTime('--- not a time')).toBeNull();
    expect(lineTime('output')).toBeNull();
  });
});

describe('TailWindow', () => {
  it('keeps the last n lines across files, oldest first', () => {
    const files = [
      { lines: ['a', 'b', 'c'], mtime: 0 },
      { lines: ['d', 'e'], mtime: 0 },
    ];
    expect(run(4, null, files)).toEqual(['b', 'c', 'd', 'e']);
    expect(run(Number.POSITIVE_INFINITY, null, files)).toEqual(['a', 'b', 'c', 'd', 'e']);
    expect(run(0, null, files)).toEqual([]);
  });

  it('drops timed lines older than since', () => {
    const lines = [pino(100, 'old'), pino(200, 'edge'), pino(300, 'new')];
    expect(run(10, 200, [{ lines, mtime: 300 }])).toEqual([lines[1], lines[2]]);
  });

  it('shows an untimed line unless a later time proves it older', () => {
    const lines = [
      mark(1000, 'started'),
      'early output',
      mark(2000, 'exited'),
      mark(5000, 'started'),
      'late output',
    ];
    // since 3000: "early output" was written before the 2000 mark, "late output" after 5000.
    expect(run(10, 3000, [{ lines, mtime: 6000 }])).toEqual([lines[3], 'late output']);
    // since 1500: "early output" may be after 1500 (it is before 2000): shown.
    expect(run(10, 1500, [{ lines, mtime: 6000 }])).toEqual(lines.slice(1));
  });

  it("bounds a file's trailing untimed lines by its last write", () => {
    const long = [mark(1000, 'started'), 'out 1', 'out 2'];
    expect(run(10, 3000, [{ lines: long, mtime: 9000 }])).toEqual(['out 1', 'out 2']);
    expect(run(10, 3000, [{ lines: long, mtime: 2000 }])).toEqual([]);
    // Per file: an old rotated file's output does not leak into a newer file's window.
    expect(
      run(10, 3000, [
        { lines: ['old output'], mtime: 2000 },
        { lines: ['new output'], mtime: 4000 },
      ]),
    ).toEqual(['new output']);
  });

  it('keeps only the last n of a long run of untimed lines', () => {
    const lines = Array.from({ length: 1000 }, (_, i) => `line ${i}`);
    expect(run(3, 10, [{ lines, mtime: 20 }])).toEqual(['line 997', 'line 998', 'line 999']);
  });
});
