// Why `svc tower serve` could not start, as one line a user can act on: the database it cannot
// reach, open or log in to, or the address it cannot listen on. Errors of another kind (a bug)
// pass through unchanged, so they keep their stack trace.
import { SvcError } from '../protocol/errors.js';

/** Node's and pg's codes of a database that is not there to answer (down, wrong host or port). */
const UNREACHABLE = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ENOTFOUND',
  'EAI_AGAIN',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'ETIMEDOUT',
  '57P03', // cannot_connect_now: starting up or shutting down
  '53300', // too_many_connections
]);
const LOGIN = new Set(['28P01', '28000']); // invalid_password, invalid_authorization_specification
const LOCAL_FILE = new Set(['EACCES', 'EPERM', 'EROFS', 'ENOTDIR', 'ENOSPC', 'EISDIR', 'ELOOP']);

/** The database URL without its password (what may be printed). */
export function redactDatabaseUrl(url: string): string {
  try {
    const u = new URL(url);
    if (u.password) u.password = '';
    return u.toString().replace(/^(\w+:\/\/[^:@/]*):@/, '$1@');
  } catch {
    return url.replace(/\/\/([^:@/]*):[^@/]*@/, '//$1@');
  }
}

function codeOf(e: unknown): string | null {
  const c = (e as { code?: unknown }).code;
  if (typeof c === 'string') return c;
  // Node's happy-eyeballs connect fails with an AggregateError of one error per address.
  const inner = (e as { errors?: unknown }).errors;
  if (Array.isArray(inner)) for (const x of inner) if (codeOf(x)) return codeOf(x);
  return null;
}

function messageOf(e: unknown): string {
  const m = e instanceof Error ? e.message : String(e);
  if (m) return m.split('\n')[0] as string;
  const inner = (e as { errors?: unknown }).errors;
  return Array.isArray(inner) && inner[0] instanceof Error
    ? inner[0].message
    : (codeOf(e) ?? 'unknown error');
}

/**
 * The error to report for a tower that failed while opening and migrating its store.
 * `database` is the --database URL (undefined: SQLite in `dataDir`).
 */
export function storeOpenError(e: unknown, database: string | undefined, dataDir: string): unknown {
  if (e instanceof SvcError) return e;
  const code = codeOf(e);
  const msg = messageOf(e);
  if (database && /^postgres(ql)?:\/\//.test(database)) {
    const where = redactDatabaseUrl(database);
    if ((code && UNREACHABLE.has(code)) || /timeout|Connection terminated/i.test(msg)) {
      return new SvcError(
        'unavailable',
        `cannot reach the database ${where}: ${msg} (is PostgreSQL running and listening there?)`,
      );
    }
    if (code === '3D000') {
      return new SvcError(
        'config_invalid',
        `database ${where}: ${msg} (create it with createdb, or fix --database)`,
      );
    }
    if (code && LOGIN.has(code)) {
      return new SvcError(
        'config_invalid',
        `the database ${where} refused the login: ${msg} (check the user and password of --database / SVC_DATABASE_URL)`,
      );
    }
    if (code === '42501') {
      return new SvcError(
        'config_invalid',
        `the database ${where} refused: ${msg} (the user needs CREATE on it)`,
      );
    }
    if (code === 'ERR_INVALID_URL' || msg.startsWith('invalid schema name')) {
      return new SvcError('config_invalid', `invalid --database ${where}: ${msg}`);
    }
    return e;
  }
  if (msg.startsWith('unsupported --database')) return new SvcError('config_invalid', msg);
  if ((code && LOCAL_FILE.has(code)) || (code?.startsWith('SQLITE_') && code !== 'SQLITE_CORRUPT')) {
    return new SvcError(
      'config_invalid',
      `cannot open the SQLite store in ${dataDir}: ${msg} (check --data-dir and its permissions)`,
    );
  }
  return e;
}

/** The error for an address the tower cannot listen on. */
export function listenError(listen: string, e: unknown): SvcError {
  const code = codeOf(e);
  if (code === 'EADDRINUSE') {
    return new SvcError(
      'unavailable',
      `cannot listen on ${listen}: the address is in use (EADDRINUSE): another tower or program holds it; stop it or choose another --listen address`,
    );
  }
  if (code === 'EACCES') {
    return new SvcError(
      'unavailable',
      `cannot listen on ${listen}: permission denied (EACCES): ports below 1024 need privileges; choose another --listen port`,
    );
  }
  return new SvcError('unavailable', `cannot listen on ${listen}: ${messageOf(e)}`);
}
