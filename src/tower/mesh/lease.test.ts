import { describe, expect, it } from 'vitest';
import { SvcError } from '../../protocol/errors.js';
import type { Principal } from '../auth/principal.js';
import { checkNotExpired, holdsLease, leftAloneVerdict } from './lease.js';

const principal = (domains: string[] | null): Principal => ({
  kind: 'node',
  id: 'node_1',
  name: 'n',
  scopes: ['work:write'],
  domains,
  expiresAt: null,
});

describe('holdsLease', () => {
  it.each([
    ['lease_a', 'claimed', true],
    ['lease_a', 'running', true],
    ['lease_a', 'pending', false],
    ['lease_a', 'completed', false],
    ['lease_b', 'claimed', false],
    [null, 'claimed', false],
  ] as const)('task lease %s in state %s: %s', (lease, state, held) => {
    expect(holdsLease({ lease_id: lease, state }, 'lease_a', ['claimed', 'running'])).toBe(held);
  });
});

describe('checkNotExpired', () => {
  const now = '2026-11-24T10:00:00.000Z';
  it.each([
    ['2026-11-24T10:00:00.001Z', false],
    [now, true],
    ['2026-11-24T09:59:59.999Z', true],
    [null, false],
  ] as const)('a lease expiring at %s is dead: %s', (expires, dead) => {
    let refused: unknown = null;
    try {
      checkNotExpired({ id: 'mt_1', lease_id: 'lease_a', lease_expires_at: expires }, now);
    } catch (e) {
      refused = e;
    }
    expect(refused instanceof SvcError ? refused.code : refused).toBe(dead ? 'stale_lease' : null);
  });
});

describe('leftAloneVerdict', () => {
  const cur = (domain: string | null, lease: string | null) => ({
    cur_state: 'claimed',
    cur_domain: domain,
    cur_lease: lease,
  });
  it.each([
    ['no such task', null, null, 'not_found'],
    ['a task without a domain (no row)', ['dom_a'], cur(null, 'lease_a'), 'not_found'],
    ['a task of a domain the caller cannot see', ['dom_b'], cur('dom_a', 'lease_a'), 'not_found'],
    ['the lease still held', ['dom_a'], cur('dom_a', 'lease_a'), 'general'],
    ['the lease still held, every domain visible', null, cur('dom_a', 'lease_a'), 'general'],
    ['another lease', ['dom_a'], cur('dom_a', 'lease_b'), 'stale_lease'],
    ['no lease any more', null, cur('dom_a', null), 'stale_lease'],
  ] as const)('%s: %s', (_what, domains, row, verdict) => {
    expect(leftAloneVerdict(principal(domains === null ? null : [...domains]), 'lease_a', row)).toBe(verdict);
  });
});
