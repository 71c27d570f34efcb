// Wire shapes of service tokens and node registration.

import { Id, Name, Timestamp } from './common.js';
import { SCOPES } from './scopes.js';
import { type Static, Type } from './type.js';

export const ScopeSchema = Type.Union(SCOPES.map((s) => Type.Literal(s)));

export const Token = Type.Object({
  id: Id,
  name: Name,
  scopes: Type.Array(ScopeSchema),
  /** null: every domain. */
  domains: Type.Union([Type.Array(Id), Type.Null()]),
  expires_at: Type.Union([Timestamp, Type.Null()]),
  revoked_at: Type.Union([Timestamp, Type.Null()]),
  created_at: Timestamp,
});
export type Token = Static<typeof Token>;

export const TokenCreate = Type.Object(
  {
    name: Name,
    scopes: Type.Array(ScopeSchema, { minItems: 1, uniqueItems: true }),
    domains: Type.Optional(Type.Array(Id, { minItems: 1, uniqueItems: true })),
    ttl_seconds: Type.Optional(Type.Integer({ minimum: 1, maximum: 10 * 365 * 86400 })),
  },
  { additionalProperties: false },
);
export type TokenCreate = Static<typeof TokenCreate>;

/** Returned once, at creation: the only time the secret token is shown. */
export const TokenCreated = Type.Composite([Token, Type.Object({ token: Type.String() })]);
export type TokenCreated = Static<typeof TokenCreated>;

/** One of the tower's node-JWT signing keys (GET /admin/signing-keys). */
export const SigningKey = Type.Object({
  kid: Type.String(),
  alg: Type.String(),
  created_at: Timestamp,
  retired_at: Type.Union([Timestamp, Type.Null()]),
  /** The key new node JWTs are signed with. */
  active: Type.Boolean(),
});
export type SigningKey = Static<typeof SigningKey>;
