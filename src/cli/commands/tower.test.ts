import { describe, expect, it } from 'vitest';
import { UsageError } from '../run.js';
import { parseMeshInFlight } from './tower.js';

describe('parseMeshInFlight', () => {
  it.each([
    ['1', 1],
    ['4', 4],
    [' 16 ', 16],
  ])('reads %j as %i', (text, n) => {
    expect(parseMeshInFlight(text)).toBe(n);
  });

  it.each(['0', '-1', '2.5', 'four', '', '1e3'])('refuses %j as a usage error', (text) => {
    expect(() => parseMeshInFlight(text)).toThrow(UsageError);
  });
});
