import { describe, expect, it } from 'vitest';
import { locateLines } from './lines.js';

describe('locateLines', () => {
  it('finds job headers and keys, and skips multi-line strings', () => {
    const map = locateLines(
      'timezone = "UTC"\n[[job]]\nname = "a"\nprompt = """\nschedule = "fake"\n"""\nschedule = "* * * * *"\n[[ job ]]\n"name" = "b"\n',
    );
    expect(map.top.get('timezone')).toBe(1);
    expect(map.jobs.map((j) => [j.line, Object.fromEntries(j.fields)])).toEqual([
      [2, { name: 3, prompt: 4, schedule: 7 }],
      [8, { name: 9 }],
    ]);
  });
});
