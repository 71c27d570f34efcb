// The secrets.sock wire format (docs/secrets.md): one JSON request per connection, one reply line.
// Kept free of schema libraries so `svcd get-secret`, which agents run often, starts fast.

/** Secret names look like environment variable names, plus '.', '-' for namespacing. */
export const SECRET_NAME_PATTERN = '^[A-Za-z_][A-Za-z0-9_.-]{0,127}$';
const SECRET_NAME_RE = new RegExp(SECRET_NAME_PATTERN);

export function isSecretName(s: unknown): s is string {
  return typeof s === 'string' && SECRET_NAME_RE.test(s);
}

export interface BrokerRequest {
  op: 'get';
  session: string;
  name: string;
}

export const BROKER_ERROR_CODES = [
  'bad_request',
  'unknown_session',
  'not_granted',
  'secret_not_found',
  'tower_unreachable',
] as const;
export type BrokerErrorCode = (typeof BROKER_ERROR_CODES)[number];

export type BrokerReply =
  | { ok: true; value: string }
  | { ok: false; error: { code: BrokerErrorCode; message: string } };

/** Largest request secrets.sock reads; longer input is answered with bad_request. */
export const MAX_BROKER_REQUEST_BYTES = 64 * 1024;

const REQUEST_FIELDS = new Set(['op', 'session', 'name']);

/**
 * Validates one decoded request. Returns the request, or the message of a bad_request
 * reply naming the field at fault. Messages never echo the caller's input values.
 */
export function parseBrokerRequest(decoded: unknown): BrokerRequest | { error: string } {
  if (typeof decoded !== 'object' || decoded === null || Array.isArray(decoded)) {
    return { error: 'request must be one JSON object {"op":"get","session":…,"name":…}' };
  }
  const o = decoded as Record<string, unknown>;
  const unknown = Object.keys(o).filter((k) => !REQUEST_FIELDS.has(k));
  if (unknown.length > 0) {
    return {
      error: `unknown field ${JSON.stringify(unknown[0]?.slice(0, 40))}: send only op, session, name`,
    };
  }
  if (o.op === undefined) return { error: 'field "op" is required: use "get"' };
  if (o.op !== 'get') return { error: 'field "op" must be "get" (the only operation)' };
  if (typeof o.session !== 'string' || o.session.length === 0 || o.session.length > 256) {
    return { error: 'field "session" must be the string in SVC_SECRETS_SESSION' };
  }
  if (!isSecretName(o.name)) {
    return {
      error: `field "name" must be a secret name (letters, digits, _ . -, starting with a letter or _, at most 128)`,
    };
  }
  return { op: 'get', session: o.session, name: o.name };
}
