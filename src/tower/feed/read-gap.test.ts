import { describe, expect, it } from 'vitest';
import { READ_GAP, readGapMs } from './hub.js';

describe('readGapMs', () => {
  it.each([
    [0, READ_GAP.MIN_MS],
    [3, READ_GAP.MIN_MS],
    [20, 30],
    [40, 60],
    [500, READ_GAP.MAX_MS],
  ])('spaces reads after a pass of %d ms by %d ms', (pass, gap) => {
    expect(readGapMs(pass)).toBe(gap);
  });
});
