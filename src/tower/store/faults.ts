// Tells a fault of the store (unreachable, too slow, full, read-only, busy, failing I/O) from
// a bug, for either dialect, and says what a client sees for it: a 503 with a code and a
// Retry-After, never a 500 (docs/operations.md). Pure: no I/O, no logging.
import type { ErrorCode } from '../../protocol/errors.js';

export type StoreFaultKind =
  /** Cannot connect, or the connection broke (refused, reset, PostgreSQL shutting down). */
  | 'unreachable'
  /** Connected, but no answer in time (statement timeout, client read timeout, pool wait). */
  | 'timeout'
  /** No space left: SQLITE_FULL, ENOSPC, PostgreSQL disk_full. */
  | 'full'
  /** The file system or the database refuses writes: EROFS, SQLITE_READONLY. */
  | 'read_only'
  /** Another writer holds the lock past the busy timeout (SQLITE_BUSY), or a deadlock. */
  | 'busy'
  /** Reading or writing the file failed (SQLITE_IOERR). */
  | 'io';

export interface StoreFault {
  kind: StoreFaultKind;
  /** What the driver said, short and stable: SQLITE_FULL, ECONNREFUSED, 57014, "Query read timeout". */
  cause: string;
  /** The driver's message. */
  message: string;
}

/** The problem code and Retry-After (seconds) clients get for each kind of fault. */
export const FAULT_ANSWER: Record<StoreFaultKind, { code: ErrorCode; retryAfter: number; what: string }> = {
  unreachable: { code: 'unavailable', retryAfter: 1, what: 'the store is unreachable' },
  timeout: { code: 'unavailable', retryAfter: 1, what: 'the store did not answer in time' },
  full: { code: 'storage_full', retryAfter: 5, what: 'the store has no space left' },
  read_only: { code: 'storage_read_only', retryAfter: 5, what: 'the store refuses writes (read-only)' },
  busy: { code: 'storage_busy', retryAfter: 1, what: 'the store is locked by another writer' },
  io: { code: 'storage_io_error', retryAfter: 5, what: 'the store cannot read or write its file' },
};

/** Socket errors of a connection that failed or broke. */
const NET_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ECONNABORTED',
  'EPIPE',
  'ETIMEDOUT',
  'EHOSTUNREACH',
  'EHOSTDOWN',
  'ENETUNREACH',
  'ENETDOWN',
  'ENOTFOUND',
  'EAI_AGAIN',
  'ERR_STREAM_DESTROYED',
]);

/** Messages of pg, pg-pool and Kysely for a connection that is gone or was never made. */
const UNREACHABLE_MESSAGES = [
  'Connection terminated',
  'Client has encountered a connection error and is not queryable',
  'Client was closed and is not queryable',
  'Cannot use a pool after calling end on the pool',
  'driver has already been destroyed',
  'connection is closed',
];

/** Messages of pg and pg-pool for a wait that ran out. */
const TIMEOUT_MESSAGES = ['Query read timeout', 'timeout expired', 'timeout exceeded when trying to connect'];

/**
 * SQLSTATEs (PostgreSQL error codes) of a store that is down, overloaded, full or slow.
 * https://www.postgresql.org/docs/current/errcodes-appendix.html
 */
function pgStateKind(state: string): StoreFaultKind | null {
  if (state.startsWith('08')) return 'unreachable'; // connection exception
  switch (state) {
    case '57P01': // admin_shutdown
    case '57P02': // crash_shutdown
    case '57P03': // cannot_connect_now (starting up, shutting down)
    case '57P05': // idle_session_timeout
    case '53300': // too_many_connections
    case '53200': // out_of_memory
      return 'unreachable';
    case '57014': // query_canceled: statement_timeout
    case '25P03': // idle_in_transaction_session_timeout
      return 'timeout';
    case '53100': // disk_full
      return 'full';
    case '25006': // read_only_sql_transaction (a standby)
      return 'read_only';
    case '40P01': // deadlock_detected
    case '40001': // serialization_failure
    case '55P03': // lock_not_available
      return 'busy';
    case '58030': // io_error
      return 'io';
    default:
      return null;
  }
}

function sqliteKind(code: string): StoreFaultKind | null {
  if (code === 'SQLITE_FULL') return 'full';
  if (code.startsWith('SQLITE_READONLY')) return 'read_only';
  if (code.startsWith('SQLITE_BUSY') || code.startsWith('SQLITE_LOCKED')) return 'busy';
  if (code.startsWith('SQLITE_IOERR') || code === 'SQLITE_CANTOPEN') return 'io';
  return null;
}

function fsKind(code: string): StoreFaultKind | null {
  if (code === 'ENOSPC' || code === 'EDQUOT' || code === 'EFBIG') return 'full';
  if (code === 'EROFS') return 'read_only';
  if (code === 'EIO') return 'io';
  return null;
}

/** The store fault `err` (or an error in its cause chain) is, or null for anything else. */
export function storeFault(err: unknown): StoreFault | null {
  let e: unknown = err;
  for (let depth = 0; depth < 5 && e instanceof Error; depth++) {
    const f = faultOf(e);
    if (f) return f;
    e = (e as { cause?: unknown }).cause;
  }
  return null;
}

function faultOf(e: Error): StoreFault | null {
  const raw = (e as Error & { code?: unknown }).code;
  const code = typeof raw === 'string' ? raw : '';
  const message = e.message;
  if (code.startsWith('SQLITE_')) {
    const kind = sqliteKind(code);
    return kind ? { kind, cause: code, message } : null;
  }
  if (/^[0-9A-Z]{5}$/.test(code) && !code.startsWith('E')) {
    const kind = pgStateKind(code);
    return kind ? { kind, cause: code, message } : null;
  }
  if (NET_CODES.has(code)) return { kind: 'unreachable', cause: code, message };
  const fs = fsKind(code);
  if (fs) return { kind: fs, cause: code, message };
  const timeout = TIMEOUT_MESSAGES.find((m) => message.includes(m));
  if (timeout) return { kind: 'timeout', cause: timeout, message };
  const gone = UNREACHABLE_MESSAGES.find((m) => message.includes(m));
  if (gone) return { kind: 'unreachable', cause: gone, message };
  return null;
}

/** Kinds that mean writes fail until someone acts (frees space, remounts, stops the other writer). */
export function isWriteFault(f: StoreFault): boolean {
  return f.kind === 'full' || f.kind === 'read_only' || f.kind === 'io' || f.kind === 'busy';
}
