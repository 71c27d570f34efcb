// Wire shapes of secrets (docs/secrets.md, docs/api.md Secrets): the tower's operator API
// (values are write-only), the node fetch, and the secrets.sock request/reply that agents
// speak to svcd. Values appear only in SecretPut bodies, SecretFetched replies and the
// broker's ok reply; never in listings, events or errors.

import { Id, INT32_RANGE, Timestamp } from './common.js';
import { SECRET_NAME_PATTERN } from './secrets-socket.js';
import { type Static, Type } from './type.js';

export * from './secrets-socket.js';

export const SecretName = Type.String({ minLength: 1, maxLength: 128, pattern: SECRET_NAME_PATTERN });

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

export const SecretRollback = Type.Object(
  { version: Type.Integer({ minimum: 1, maximum: INT32_RANGE.maximum }) },
  closed,
);
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

export const SecretFetched = Type.Object({
  name: SecretName,
  domain_id: Id,
  version: Type.Integer(),
  value: Type.String(),
});
export type SecretFetched = Static<typeof SecretFetched>;

const Nullable = <T extends ReturnType<typeof Type.String>>(t: T) => Type.Union([t, Type.Null()]);

export const MasterKeyStatus = Type.Object({
  /** Fingerprint of the key new versions are encrypted with ("mk_…"); never the key. Null: no key. */
  key_id: Nullable(Type.String()),
  source: Type.Union([Type.Literal('file'), Type.Literal('env')]),
  /** Other keys configured for decryption only. */
  previous_key_ids: Type.Array(Type.String()),
  /** How many stored secret versions are encrypted under each key id. */
  versions_by_key: Type.Record(Type.String(), Type.Integer()),
  /** Why this tower cannot seal or open values (wrong or missing key), or null. */
  problem: Nullable(Type.String()),
});
export type MasterKeyStatus = Static<typeof MasterKeyStatus>;

export const MasterKeyRotated = Type.Object({
  key_id: Type.String(),
  previous_key_id: Type.String(),
  reencrypted: Type.Integer(),
});
export type MasterKeyRotated = Static<typeof MasterKeyRotated>;
