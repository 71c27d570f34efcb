// The mesh task state machine's decisions (docs/mesh.md, States), over plain rows: which
// states are final, what an expired lease, a retry or a cancel sets, and how a broadcast
// parent settles from its runs. Pure: the operations write what these return.
import type { MeshState } from '../../protocol/mesh.js';
import type { MeshTaskRow } from './migrations.js';

const TERMINAL: readonly string[] = ['completed', 'failed', 'cancelled'] satisfies MeshState[];

/** Completed, failed or cancelled: no transition leaves it but a retry of a failed task. */
export function isTerminal(state: string): boolean {
  return TERMINAL.includes(state);
}

/** States a task holds a lease in (claimed or running). */
export const LEASED: readonly MeshState[] = ['claimed', 'running'];

/** States a cancel applies to: every state that has not ended. */
export const CANCELLABLE: readonly MeshState[] = ['pending', 'claimed', 'running'];

type Change = Partial<MeshTaskRow> & { updated_at: string };

/**
 * A leased task whose lease expired: back to pending for its next attempt, or failed once it
 * used its last one (`exhausted`).
 */
export function expiredLeaseChange(
  row: Pick<MeshTaskRow, 'attempt' | 'max_attempts' | 'claimed_by'>,
  now: string,
): { exhausted: boolean; set: Change } {
  const exhausted = Number(row.attempt) >= Number(row.max_attempts);
  const set: Change = exhausted
    ? {
        state: 'failed',
        failure_reason: `lease expired on attempt ${row.attempt} of ${row.max_attempts} (agent ${row.claimed_by ?? '?'} stopped heartbeating)`,
        lease_id: null,
        lease_expires_at: null,
        updated_at: now,
      }
    : {
        state: 'pending',
        attempt: Number(row.attempt) + 1,
        claimed_by: null,
        lease_id: null,
        lease_expires_at: null,
        updated_at: now,
      };
  return { exhausted, set };
}

/** A failed task back to pending for one more attempt (max_attempts grows to allow it). */
export function requeueChange(row: Pick<MeshTaskRow, 'attempt' | 'max_attempts'>, now: string): Change {
  return {
    state: 'pending',
    attempt: Number(row.attempt) + 1,
    max_attempts: Math.max(Number(row.max_attempts), Number(row.attempt) + 1),
    failure_reason: null,
    claimed_by: null,
    lease_id: null,
    lease_expires_at: null,
    updated_at: now,
  };
}

export function cancelChange(now: string): Change {
  return { state: 'cancelled', lease_id: null, lease_expires_at: null, updated_at: now };
}

/**
 * A broadcast parent's state once its runs ended: completed if every run completed, else
 * failed; null while a run has not ended.
 */
export function settledParentChange(runStates: readonly string[], now: string): Change | null {
  if (runStates.some((s) => !isTerminal(s))) return null;
  const state = runStates.every((s) => s === 'completed') ? 'completed' : 'failed';
  return {
    state,
    failure_reason: state === 'failed' ? 'one or more broadcast runs did not complete' : null,
    updated_at: now,
  };
}

/** A failed broadcast parent reopened because one of its runs is retried. */
export function reopenChange(now: string): Change {
  return { state: 'pending', failure_reason: null, updated_at: now };
}
