import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { MESH_STATES } from '../../protocol/mesh.js';
import {
  cancelChange,
  expiredLeaseChange,
  isTerminal,
  reopenChange,
  requeueChange,
  settledParentChange,
} from './states.js';

const NOW = '2026-11-24T10:00:00.000Z';

describe('mesh task states', () => {
  it.each(MESH_STATES.map((s) => [s, ['completed', 'failed', 'cancelled'].includes(s)] as const))(
    '%s is final: %s',
    (state, final) => {
      expect(isTerminal(state)).toBe(final);
    },
  );

  it('returns an expired lease to pending and counts the attempt', () => {
    expect(expiredLeaseChange({ attempt: 1, max_attempts: 3, claimed_by: 'ag_1' }, NOW)).toEqual({
      exhausted: false,
      set: {
        state: 'pending',
        attempt: 2,
        claimed_by: null,
        lease_id: null,
        lease_expires_at: null,
        updated_at: NOW,
      },
    });
  });

  it('fails a task whose lease expired on its last attempt, naming the agent', () => {
    expect(expiredLeaseChange({ attempt: 3, max_attempts: 3, claimed_by: 'ag_1' }, NOW)).toEqual({
      exhausted: true,
      set: {
        state: 'failed',
        failure_reason: 'lease expired on attempt 3 of 3 (agent ag_1 stopped heartbeating)',
        lease_id: null,
        lease_expires_at: null,
        updated_at: NOW,
      },
    });
  });

  it('fails an expired lease exactly when the attempts are used up, and never leaves a lease behind', () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 100 }), fc.integer({ min: 1, max: 100 }), (attempt, max) => {
        const { exhausted, set } = expiredLeaseChange({ attempt, max_attempts: max, claimed_by: null }, NOW);
        expect(exhausted).toBe(attempt >= max);
        expect(set.state).toBe(exhausted ? 'failed' : 'pending');
        expect(set.lease_id).toBeNull();
        expect(set.lease_expires_at).toBeNull();
        if (!exhausted) expect(set.attempt).toBe(attempt + 1);
      }),
    );
  });

  it('retries a failed task once more, raising max_attempts when it was used up', () => {
    expect(requeueChange({ attempt: 1, max_attempts: 3 }, NOW)).toMatchObject({
      attempt: 2,
      max_attempts: 3,
    });
    expect(requeueChange({ attempt: 3, max_attempts: 3 }, NOW)).toEqual({
      state: 'pending',
      attempt: 4,
      max_attempts: 4,
      failure_reason: null,
      claimed_by: null,
      lease_id: null,
      lease_expires_at: null,
      updated_at: NOW,
    });
  });

  it('cancels and reopens without a lease or a failure reason', () => {
    expect(cancelChange(NOW)).toEqual({
      state: 'cancelled',
      lease_id: null,
      lease_expires_at: null,
      updated_at: NOW,
    });
    expect(reopenChange(NOW)).toEqual({ state: 'pending', failure_reason: null, updated_at: NOW });
  });

  it.each([
    [['running', 'completed'], null],
    [['pending', 'failed'], null],
    [['claimed'], null],
    [['completed', 'completed'], 'completed'],
    [['completed', 'failed'], 'failed'],
    [['completed', 'cancelled'], 'failed'],
    [['cancelled'], 'failed'],
  ] as const)('settles a broadcast whose runs are %j as %s', (runs, state) => {
    const set = settledParentChange(runs, NOW);
    expect(set?.state ?? null).toBe(state);
    if (state === 'failed') expect(set?.failure_reason).toBe('one or more broadcast runs did not complete');
    if (state === 'completed') expect(set?.failure_reason).toBeNull();
  });
});
