// Wire shapes of secrets (DESIGN §3 Records, §4 Secrets broker): the tower's operator API
// (values are write-only), the node fetch, and the secrets.sock request/reply that agents
// speak to svcd. Values appear only in SecretPut bodies, SecretFetched replies and the
// broker's ok reply; never in listings, events or errors.
import { type Static, Type } from '@sinclair/typebox';
import { Id, Timestamp } from './common.js';

/** Secret names look like environment variable names, plus '.', '-' for namespacing. */
export const SECRET_NAME_PATTERN = '^[A-Za-z_][A-Za-z0-9_.-]{0,127}$';
const SECRET_NAME_RE = new RegExp(SECRET_NAME_PATTERN);
export const SecretName = Type.String({ minLength: 1, maxLength: 128, pattern: SECRET_NAME_PATTERN });

export function isSecretName(s: unknown): s is string {
  return typeof s === 'string' && SECRET_NAME_RE.test(s);
}

/** Largest value the tower stores: 64 KiB of UTF-8 text (binary values: base64 them). */
export const MAX_SECRET_VALUE_BYTES = 64 * 1024;
/** Old versions kept per secret (for rollback); older ones are deleted with their ciphertext. */
export const SECRET_VERSIONS_KEPT = 10;

const closed = { additionalProperties: false } as const;

/** Selects the domain of a secret: every /secrets route takes ?domain_id=. */
export const SecretDomainQuery = Type.Object({ domain_id: Id }, closed);
export type SecretDomainQuery = Static<typeof SecretDomainQuery>;

export const SecretListQuery = Type.Object(
  {
    domain_id: Type.Optional(Id),
    limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 500, default: 100 })),
    cursor: Type.Optional(Type.String({ maxLength: 200 })),
  },
  closed,
);
export type SecretListQuery = Static<typeof SecretListQuery>;

export const SecretPut = Type.Object(
  {
    value: Type.String({ minLength: 1, maxLength: MAX_SECRET_VALUE_BYTES }),
    description: Type.Optional(Type.String({ maxLength: 1000 })),
  },
  closed,
);
export type SecretPut = Static<typeof SecretPut>;

export const SecretGrantCreate = Type.Object({ agent_id: Id }, closed);
export type SecretGrantCreate = Static<typeof SecretGrantCreate>;

export const SecretRollback = Type.Object({ version: Type.Integer({ minimum: 1 }) }, closed);
export type SecretRollback = Static<typeof SecretRollback>;

export const SecretGrant = Type.Object({
  agent_id: Id,
  granted_at: Timestamp,
  granted_by: Type.String(),
});
export type SecretGrant = Static<typeof SecretGrant>;

export const SecretVersionInfo = Type.Object({
  version: Type.Integer(),
  created_at: Timestamp,
  created_by: Type.String(),
});
export type SecretVersionInfo = Static<typeof SecretVersionInfo>;

/** What listings and GET return: metadata only, never the value. */
export const SecretInfo = Type.Object({
  id: Id,
  domain_id: Id,
  name: SecretName,
  description: Type.String(),
  /** The current version: what nodes fetch. */
  version: Type.Integer(),
  /** Kept versions, newest first. */
  versions: Type.Array(SecretVersionInfo),
  grants: Type.Array(SecretGrant),
  created_at: Timestamp,
  updated_at: Timestamp,
});
export type SecretInfo = Static<typeof SecretInfo>;

/** Node → tower: POST /secrets/{name}/fetch with the node JWT. */
export const SecretFetch = Type.Object({ agent_id: Id }, closed);
export type SecretFetch = Static<typeof SecretFetch>;

export interface SecretFetched {
  name: string;
  domain_id: string;
  version: number;
  value: string;
}

export interface MasterKeyStatus {
  /** Fingerprint of the key new versions are encrypted with ("mk_…"); never the key. */
  key_id: string;
  source: 'file' | 'env';
  /** Other keys configured for decryption only. */
  previous_key_ids: string[];
  /** How many stored secret versions are encrypted under each key id. */
  versions_by_key: Record<string, number>;
}

export interface MasterKeyRotated {
  key_id: string;
  previous_key_id: string;
  reencrypted: number;
}

// secrets.sock (one JSON request per connection, DESIGN §4) -----------------------------

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
