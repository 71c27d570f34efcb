import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { FAULT_ANSWER, isWriteFault, type StoreFaultKind, storeFault } from './faults.js';

const withCode = (message: string, code: string) => Object.assign(new Error(message), { code });

/** A server error as pg raises it. */
const pgError = (message: string, code: string) => {
  const e = new pg.DatabaseError(message, 0, 'error');
  e.code = code;
  return e;
};

describe('store faults', () => {
  it.each<[string, Error, StoreFaultKind | null, string | null]>([
    ['SQLite full', withCode('database or disk is full', 'SQLITE_FULL'), 'full', 'SQLITE_FULL'],
    [
      'SQLite read-only',
      withCode('attempt to write a readonly database', 'SQLITE_READONLY'),
      'read_only',
      null,
    ],
    ['SQLite read-only directory', withCode('x', 'SQLITE_READONLY_DIRECTORY'), 'read_only', null],
    ['SQLite busy', withCode('database is locked', 'SQLITE_BUSY'), 'busy', null],
    ['SQLite locked table', withCode('database table is locked', 'SQLITE_LOCKED'), 'busy', null],
    ['SQLite write error', withCode('disk I/O error', 'SQLITE_IOERR_WRITE'), 'io', 'SQLITE_IOERR_WRITE'],
    [
      'SQLite constraint (a bug or a conflict, not a fault)',
      withCode('UNIQUE', 'SQLITE_CONSTRAINT_UNIQUE'),
      null,
      null,
    ],
    ['no space (fs)', withCode('no space left on device', 'ENOSPC'), 'full', 'ENOSPC'],
    ['read-only file system', withCode('read-only file system', 'EROFS'), 'read_only', 'EROFS'],
    [
      'connection refused',
      withCode('connect ECONNREFUSED 127.0.0.1:5432', 'ECONNREFUSED'),
      'unreachable',
      null,
    ],
    ['connection reset', withCode('read ECONNRESET', 'ECONNRESET'), 'unreachable', null],
    ['pg: connection ended', new Error('Connection terminated unexpectedly'), 'unreachable', null],
    [
      'pg: not queryable',
      new Error('Client has encountered a connection error and is not queryable'),
      'unreachable',
      null,
    ],
    ['pg: read timeout', new Error('Query read timeout'), 'timeout', 'Query read timeout'],
    ['pg: connect timeout', new Error('timeout expired'), 'timeout', null],
    ['pg-pool: no free connection', new Error('timeout exceeded when trying to connect'), 'timeout', null],
    [
      'PostgreSQL statement timeout',
      pgError('canceling statement due to statement timeout', '57014'),
      'timeout',
      '57014',
    ],
    [
      'PostgreSQL shutting down',
      pgError('terminating connection due to administrator command', '57P01'),
      'unreachable',
      null,
    ],
    ['PostgreSQL starting up', pgError('the database system is starting up', '57P03'), 'unreachable', null],
    ['PostgreSQL disk full', pgError('could not extend file', '53100'), 'full', '53100'],
    ['PostgreSQL deadlock', pgError('deadlock detected', '40P01'), 'busy', null],
    [
      'PostgreSQL NUL in text (refused before, never a fault)',
      pgError('invalid byte sequence', '22021'),
      null,
      null,
    ],
    ['PostgreSQL out of range', pgError('value out of range', '22003'), null, null],
    ['a plain bug', new TypeError('x is undefined'), null, null],
  ])('classifies %s', (_what, err, kind, cause) => {
    const f = storeFault(err);
    expect(f?.kind ?? null).toBe(kind);
    if (cause) expect(f?.cause).toBe(cause);
  });

  it('finds the fault in the cause chain', () => {
    const inner = withCode('database or disk is full', 'SQLITE_FULL');
    expect(storeFault(new Error('write failed', { cause: inner }))?.kind).toBe('full');
  });

  it('answers every fault with a 503 and a Retry-After; only disk-side faults hold writes back', () => {
    for (const [kind, a] of Object.entries(FAULT_ANSWER)) {
      expect(a.retryAfter).toBeGreaterThan(0);
      expect(isWriteFault({ kind: kind as StoreFaultKind, cause: '', message: '' })).toBe(
        ['full', 'read_only', 'busy', 'io'].includes(kind),
      );
    }
    expect(FAULT_ANSWER.full.code).toBe('storage_full');
    expect(FAULT_ANSWER.unreachable.code).toBe('unavailable');
  });
});
