// Lease checks, decided over plain data: whether a request holds a task's lease, whether
// that lease is still alive, and what a request the one-statement path left alone gets.
// No I/O: the operations read the rows and carry the verdicts out.
import { SvcError } from '../../protocol/errors.js';
import { canSeeDomain, type Principal } from '../auth/principal.js';
import type { MeshTaskRow } from './migrations.js';

/** `leaseId` is the task's current lease and the task is in one of `from`. */
export function holdsLease(
  row: Pick<MeshTaskRow, 'lease_id' | 'state'>,
  leaseId: string,
  from: readonly string[],
): boolean {
  return row.lease_id === leaseId && from.includes(row.state);
}

/**
 * Fencing: a lease past its expiry is dead even before the sweeper has returned the task to
 * pending (the sweep runs every second), so a worker that stopped heartbeating in time can
 * neither extend it nor finish the task with it. ISO 8601 UTC text compares in time order.
 */
export function checkNotExpired(
  row: Pick<MeshTaskRow, 'id' | 'lease_id' | 'lease_expires_at'>,
  now: string,
): void {
  if (row.lease_expires_at !== null && row.lease_expires_at <= now) {
    throw new SvcError(
      'stale_lease',
      `lease ${row.lease_id} of mesh task ${row.id} expired at ${row.lease_expires_at}: the task goes back to pending`,
    );
  }
}

/** A task as a one-statement transition saw it when it left the request alone. */
export interface LeftAlone {
  cur_state: string | null;
  cur_domain: string | null;
  cur_lease: string | null;
}

/**
 * A request the one-statement path left alone (`cur` null: no such task): not found (also
 * when `p` may not see it), a stale lease, or, when it still held the lease, one for the
 * general transaction, which decides under a lock (an expired lease, another node's lease, a
 * broadcast run, a start of a task already running, a row changed meanwhile).
 */
export function leftAloneVerdict(
  p: Principal,
  leaseId: string,
  cur: LeftAlone | null,
): 'not_found' | 'stale_lease' | 'general' {
  if (!cur || cur.cur_domain === null || !canSeeDomain(p, cur.cur_domain)) return 'not_found';
  return cur.cur_lease === leaseId ? 'general' : 'stale_lease';
}
