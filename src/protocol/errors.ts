// Stable error codes shared by every edge (HTTP problem+json, JSON-RPC, secrets.sock, CLI).
// Users match on `code`, never on messages; docs/errors.md lists them all.
import { type Static, Type } from './type.js';

export const ERROR_CODES = {
  // request shape
  invalid_json: { status: 400, title: 'Request body is not valid JSON' },
  validation_failed: { status: 400, title: 'Request failed validation' },
  bad_request: { status: 400, title: 'Bad request' },
  payload_too_large: { status: 413, title: 'Request body too large' },
  unsupported_media_type: { status: 415, title: 'Unsupported media type' },
  // who asks
  unauthenticated: { status: 401, title: 'Authentication required' },
  forbidden: { status: 403, title: 'Not allowed' },
  rate_limited: { status: 429, title: 'Rate limit exceeded' },
  // what is asked for
  not_found: { status: 404, title: 'Not found' },
  method_not_allowed: { status: 405, title: 'Method not allowed' },
  conflict: { status: 409, title: 'Conflict' },
  illegal_transition: { status: 409, title: 'Illegal state transition' },
  stale_lease: { status: 409, title: 'Lease is not current' },
  already_decided: { status: 409, title: 'Already decided' },
  // server side
  internal: { status: 500, title: 'Internal error' },
  unavailable: { status: 503, title: 'Service unavailable' },
  // the store cannot take writes (docs/operations.md): reads and the feed keep serving
  storage_full: { status: 503, title: 'Storage full' },
  storage_read_only: { status: 503, title: 'Storage read-only' },
  storage_busy: { status: 503, title: 'Storage busy' },
  storage_io_error: { status: 503, title: 'Storage I/O error' },
  // node side (svcd)
  config_invalid: { status: 400, title: 'Configuration is invalid' },
  tower_unreachable: { status: 503, title: 'Tower unreachable' },
  unknown_session: { status: 403, title: 'Unknown secrets session' },
  not_granted: { status: 403, title: 'Secret not granted to this agent' },
  secret_not_found: { status: 404, title: 'Secret not found' },
  agent_not_found: { status: 404, title: 'Agent not found' },
  node_offline: { status: 503, title: 'Node offline' },
  not_authorized: { status: 403, title: 'Not authorized' },
  secret_mismatch: { status: 403, title: 'Attach secret mismatch' },
  validation_rejected: { status: 422, title: 'Payload rejected by validation' },
  // secrets (tower)
  master_key_mismatch: { status: 500, title: 'Secret cannot be decrypted with the master key' },
  // agent lifecycle (svcd supervisor)
  agent_not_running: { status: 409, title: 'Agent is not running' },
} as const;

export type ErrorCode = keyof typeof ERROR_CODES;

export interface FieldError {
  /** JSON pointer style path of the offending field, e.g. "body/title". */
  field: string;
  message: string;
}

export interface SvcErrorOptions {
  errors?: FieldError[];
  /** Seconds, for rate_limited and the 503s of an unavailable store. */
  retryAfter?: number;
  cause?: unknown;
}

/** The one error type: a stable code, its HTTP status, and a message a user can act on. */
export class SvcError extends Error {
  readonly code: ErrorCode;
  readonly status: number;
  readonly errors?: FieldError[];
  readonly retryAfter?: number;

  constructor(code: ErrorCode, message: string, opts: SvcErrorOptions = {}) {
    super(message, opts.cause === undefined ? undefined : { cause: opts.cause });
    this.name = 'SvcError';
    this.code = code;
    this.status = ERROR_CODES[code].status;
    if (opts.errors) this.errors = opts.errors;
    if (opts.retryAfter !== undefined) this.retryAfter = opts.retryAfter;
  }
}

export function isSvcError(e: unknown): e is SvcError {
  return e instanceof SvcError;
}

const FieldErrorSchema = Type.Object({ field: Type.String(), message: Type.String() });

/** RFC 9457 problem details as the tower sends them (`application/problem+json`). */
export const ProblemSchema = Type.Object({
  /** `urn:svc:error:<code>`. */
  type: Type.String(),
  title: Type.String(),
  status: Type.Integer(),
  /** For people; may change. */
  detail: Type.String(),
  /** Stable: what clients match on (docs/errors.md). An enum in the document, a string to serializers. */
  code: Type.String({ enum: Object.keys(ERROR_CODES) }),
  /** Field errors of `validation_failed`. */
  errors: Type.Optional(Type.Array(FieldErrorSchema)),
});

export type Problem = Omit<Static<typeof ProblemSchema>, 'code'> & { code: ErrorCode };

export function problemOf(e: SvcError): Problem {
  const p: Problem = {
    type: `urn:svc:error:${e.code}`,
    title: ERROR_CODES[e.code].title,
    status: e.status,
    detail: e.message,
    code: e.code,
  };
  if (e.errors) p.errors = e.errors;
  return p;
}

export function isErrorCode(s: unknown): s is ErrorCode {
  return typeof s === 'string' && Object.hasOwn(ERROR_CODES, s);
}

/** Rebuilds the SvcError a tower answered with (problem+json), for clients of the API. */
export function errorFromProblem(status: number, text: string): SvcError {
  try {
    const p = JSON.parse(text) as Partial<Problem>;
    if (isErrorCode(p.code)) {
      return new SvcError(
        p.code,
        p.detail ?? p.title ?? `HTTP ${status}`,
        p.errors ? { errors: p.errors } : {},
      );
    }
  } catch {
    // not a problem document
  }
  return new SvcError(status >= 500 ? 'unavailable' : 'bad_request', `HTTP ${status}: ${text.slice(0, 200)}`);
}
