// A benchmark's count checks: exact counts, each item once, and no figures after a failure.
import { afterEach, describe, expect, it, vi } from 'vitest';
import { countChecks, exactlyOnce } from './counts.mjs';

afterEach(() => vi.restoreAllMocks());

const quiet = () => vi.spyOn(console, 'error').mockImplementation(() => {});

describe('countChecks', () => {
  it('accepts a count equal to the expected one and lets the run write', () => {
    const checks = countChecks('t');
    const exit = vi.spyOn(process, 'exit').mockImplementation(() => undefined);
    expect(checks.exact('deliveries', 10, 10)).toBe(true);
    checks.orExit();
    expect(exit).not.toHaveBeenCalled();
  });

  it('fails on one too many as on one too few, and exits 1 before anything is written', () => {
    quiet();
    const checks = countChecks('t');
    const exit = vi.spyOn(process, 'exit').mockImplementation(() => undefined);
    expect(checks.exact('deliveries', 11, 10)).toBe(false);
    expect(checks.exact('completions', 9, 10)).toBe(false);
    expect(checks.failures).toEqual([
      'deliveries: counted 11 where exactly 10 were expected (1 too many)',
      'completions: counted 9 where exactly 10 were expected (1 missing)',
    ]);
    checks.orExit();
    expect(exit).toHaveBeenCalledWith(1);
  });
});

describe('exactlyOnce', () => {
  it('passes each id seen once, as many as expected', () => {
    const checks = countChecks('t');
    expect(exactlyOnce(checks, 'tasks', ['a', 'b', 'c'], 3)).toBe(true);
    expect(checks.failures).toEqual([]);
  });

  it('fails an id seen twice even when the total matches', () => {
    quiet();
    const checks = countChecks('t');
    expect(exactlyOnce(checks, 'tasks', ['a', 'b', 'b'], 3)).toBe(false);
    expect(checks.failures).toEqual([
      'tasks: 1 counted more than once',
      'tasks (distinct): counted 2 where exactly 3 were expected (1 missing)',
    ]);
  });
});
