// Turns an Authorization header into a Principal: service token, node JWT or OIDC JWT.
// Lookups are cached for at most `cacheMs` (default 1 s), which bounds how long a revoked
// or rotated credential keeps working on an open stream or a busy replica.
import type { Clock } from '../../lib/clock.js';
import { SvcError } from '../../protocol/errors.js';
import type { Scope } from '../../protocol/scopes.js';
import type { Db } from '../store/types.js';
import type { OidcVerifier } from './oidc.js';
import type { Principal } from './principal.js';
import { NODE_JWT_ISSUER, type SigningKeys } from './signing-keys.js';
import { findTokenByHash, hashToken, TOKEN_PREFIX } from './tokens.js';

export interface AuthenticatorDeps {
  db: Db;
  clock: Clock;
  keys: SigningKeys;
  oidc: OidcVerifier | null;
  cacheMs?: number;
}

interface CacheEntry {
  principal: Principal;
  at: number;
}

const NODE_SCOPES: Scope[] = ['feed:read', 'work:write'];
/** How old the signing keys may be for a fresh lookup (open channels' re-checks). */
const FRESH_KEYS_MS = 500;

export interface LookupOptions {
  /** Skip the cache (the answer still refreshes it): for re-checks that must see revocations
   * made on other replicas at once. */
  fresh?: boolean;
}

export class Authenticator {
  private cache = new Map<string, CacheEntry>();
  private readonly cacheMs: number;

  constructor(private readonly deps: AuthenticatorDeps) {
    this.cacheMs = deps.cacheMs ?? 1000;
  }

  /** Reads "Bearer <credential>"; throws unauthenticated with a reason a user can act on. */
  async fromHeader(header: string | undefined, opts: LookupOptions = {}): Promise<Principal> {
    if (!header)
      throw new SvcError(
        'unauthenticated',
        'missing Authorization header: send "Authorization: Bearer <token>"',
      );
    const m = /^Bearer\s+(\S+)\s*$/i.exec(header);
    if (!m?.[1]) throw new SvcError('unauthenticated', 'Authorization header must be "Bearer <token>"');
    return this.fromCredential(m[1], opts);
  }

  async fromCredential(credential: string, opts: LookupOptions = {}): Promise<Principal> {
    const now = this.deps.clock.now();
    const cached = opts.fresh ? undefined : this.cache.get(credential);
    let principal: Principal;
    if (cached && now - cached.at < this.cacheMs) {
      principal = cached.principal;
    } else {
      try {
        principal = await this.lookup(credential, opts.fresh === true);
      } catch (e) {
        this.cache.delete(credential);
        throw e;
      }
      if (this.cache.size > 10_000) this.cache.clear();
      this.cache.set(credential, { principal, at: now });
    }
    if (principal.expiresAt !== null && principal.expiresAt <= now) {
      this.cache.delete(credential);
      throw new SvcError('unauthenticated', 'credential expired: create a new token');
    }
    return principal;
  }

  /**
   * True when `header` carries a credential this replica authenticated before (it is in the
   * cache, however old): such a request is not a guess, and an address over its failure limit
   * still lets it through to authentication (http/auth-hook.ts).
   */
  knownCredential(header: string): boolean {
    const m = /^Bearer\s+(\S+)\s*$/i.exec(header);
    return m?.[1] !== undefined && this.cache.has(m[1]);
  }

  /** Forgets cached lookups, e.g. right after this replica revoked a token. */
  invalidate(): void {
    this.cache.clear();
  }

  private async lookup(credential: string, fresh: boolean): Promise<Principal> {
    if (credential.startsWith(TOKEN_PREFIX)) return this.lookupToken(credential);
    if (credential.split('.').length === 3) {
      if (jwtIssuer(credential) === NODE_JWT_ISSUER) return this.lookupNode(credential, fresh);
      if (this.deps.oidc) return this.deps.oidc(credential);
      throw new SvcError('unauthenticated', 'OIDC tokens are not accepted: the tower has no --oidc-issuer');
    }
    throw new SvcError('unauthenticated', 'unrecognized credential: expected a svc_ token or a JWT');
  }

  private async lookupToken(token: string): Promise<Principal> {
    const row = await findTokenByHash(this.deps.db, hashToken(token));
    if (!row) throw new SvcError('unauthenticated', 'unknown token');
    if (row.revoked_at !== null) throw new SvcError('unauthenticated', 'token revoked');
    return {
      kind: 'token',
      id: row.id,
      name: row.name,
      scopes: JSON.parse(row.scopes) as Scope[],
      domains: row.domains === null ? null : (JSON.parse(row.domains) as string[]),
      expiresAt: row.expires_at === null ? null : Date.parse(row.expires_at),
    };
  }

  private async lookupNode(jwt: string, fresh: boolean): Promise<Principal> {
    // A fresh lookup sees keys retired on other replicas (re-read at most once a second).
    const claims = await this.deps.keys.verifyNode(jwt, fresh ? { maxKeyAgeMs: FRESH_KEYS_MS } : {});
    const node = await this.deps.db
      .selectFrom('nodes')
      .select(['id', 'hostname', 'jti', 'domains'])
      .where('id', '=', claims.sub)
      .executeTakeFirst();
    if (!node) throw new SvcError('unauthenticated', 'node is not registered: run "svc agent node register"');
    if (node.jti !== claims.jti) {
      throw new SvcError(
        'unauthenticated',
        'node token was rotated by a later registration: use the new node.json',
      );
    }
    return {
      kind: 'node',
      id: node.id,
      name: node.hostname,
      scopes: NODE_SCOPES,
      domains: node.domains === null ? null : (JSON.parse(node.domains) as string[]),
      expiresAt: null,
      nodeId: node.id,
    };
  }
}

function jwtIssuer(jwt: string): string | null {
  try {
    const payload = JSON.parse(Buffer.from(jwt.split('.')[1] ?? '', 'base64url').toString('utf8')) as {
      iss?: unknown;
    };
    return typeof payload.iss === 'string' ? payload.iss : null;
  } catch {
    return null;
  }
}
