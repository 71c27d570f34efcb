// Turns an Authorization header into a Principal: service token, node JWT or OIDC JWT.
// Lookups are cached for at most `cacheMs` (default 1 s), which bounds how long a revoked
// or rotated credential keeps working on an open stream or a busy replica. recheck() serves
// the re-checks of open connections (credential-watch.ts) in bulk.
import { decodeProtectedHeader } from 'jose';
import type { Clock } from '../../lib/clock.js';
import { isSvcError, SvcError } from '../../protocol/errors.js';
import type { Scope } from '../../protocol/scopes.js';
import type { Db } from '../store/types.js';
import type { OidcVerifier } from './oidc.js';
import type { Principal } from './principal.js';
import { NODE_JWT_ISSUER, type NodeClaims, type SigningKeys } from './signing-keys.js';
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

/** Nodes whose rows one re-check query reads. */
const RECHECK_BATCH = 500;

/** A re-check's verdict on one credential: still good, refused (why), or not known this time
 * (the store did not answer: not a revocation). */
export type Recheck = { ok: true } | { ok: false; why: string } | { ok: 'unknown'; err: unknown };

/** A node JWT whose signature verified: its claims and the key that signed it. */
type VerifiedNode = NodeClaims & { kid: string };

type NodeRow = { id: string; hostname: string; jti: string; domains: string | null };

export interface LookupOptions {
  /** Skip the cache (the answer still refreshes it): for re-checks that must see revocations
   * made on other replicas at once. */
  fresh?: boolean;
}

export class Authenticator {
  private cache = new Map<string, CacheEntry>();
  /** Node JWTs verified once: a JWT never changes and node JWTs carry no expiry (a node's
   * credential ends by re-registration or a retired key: SigningKeys.signNode), so a re-check
   * needs only its key to be active and its node's row to name its jti still. */
  private verifiedNodes = new Map<string, VerifiedNode>();
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
    const credential = bearer(header);
    return credential !== null && this.cache.has(credential);
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
    const refused = nodeRefusal(node, claims);
    if (refused !== null) throw new SvcError('unauthenticated', refused);
    if (this.verifiedNodes.size > 100_000) this.verifiedNodes.clear();
    this.verifiedNodes.set(jwt, { ...claims, kid: decodeProtectedHeader(jwt).kid ?? '' });
    return nodePrincipal(node as NodeRow);
  }

  /**
   * Re-checks the credentials of open connections past the cache, so that a revocation made
   * on any replica shows at once. A node JWT verified before is not verified again: its key
   * must still be active, and its node's row must still name its jti, read for all of them
   * with one query per RECHECK_BATCH nodes (a fleet's channels would otherwise cost a
   * signature check and a query each, every pass). Other credentials: one lookup each.
   */
  async recheck(headers: readonly string[]): Promise<Map<string, Recheck>> {
    const out = new Map<string, Recheck>();
    const nodes: { header: string; jwt: string; claims: VerifiedNode }[] = [];
    const singles: Promise<void>[] = [];
    for (const header of headers) {
      const jwt = bearer(header);
      const claims = jwt === null ? undefined : this.verifiedNodes.get(jwt);
      if (jwt !== null && claims !== undefined) nodes.push({ header, jwt, claims });
      else
        singles.push(
          this.fromHeader(header, { fresh: true }).then(
            () => void out.set(header, { ok: true }),
            (e: unknown) => void out.set(header, verdict(e)),
          ),
        );
    }
    if (nodes.length > 0) {
      try {
        await this.recheckNodes(nodes, out);
      } catch (e) {
        for (const n of nodes) if (!out.has(n.header)) out.set(n.header, { ok: 'unknown', err: e });
      }
    }
    await Promise.all(singles);
    return out;
  }

  private async recheckNodes(
    nodes: { header: string; jwt: string; claims: VerifiedNode }[],
    out: Map<string, Recheck>,
  ): Promise<void> {
    await this.deps.keys.freshen(FRESH_KEYS_MS);
    const refuse = (n: { header: string; jwt: string }, why: string) => {
      this.verifiedNodes.delete(n.jwt);
      this.cache.delete(n.jwt);
      out.set(n.header, { ok: false, why });
    };
    const live = nodes.filter((n) => {
      if (this.deps.keys.isActive(n.claims.kid)) return true;
      refuse(n, `invalid node token: unknown key id ${n.claims.kid}`);
      return false;
    });
    const ids = [...new Set(live.map((n) => n.claims.sub))];
    const rows = new Map<string, NodeRow>();
    for (let i = 0; i < ids.length; i += RECHECK_BATCH) {
      const batch = await this.deps.db
        .selectFrom('nodes')
        .select(['id', 'hostname', 'jti', 'domains'])
        .where('id', 'in', ids.slice(i, i + RECHECK_BATCH))
        .execute();
      for (const r of batch) rows.set(r.id, r);
    }
    const now = this.deps.clock.now();
    for (const n of live) {
      const row = rows.get(n.claims.sub);
      const refused = nodeRefusal(row, n.claims);
      if (refused !== null) refuse(n, refused);
      else {
        out.set(n.header, { ok: true });
        this.cache.set(n.jwt, { principal: nodePrincipal(row as NodeRow), at: now });
      }
    }
  }
}

/** Why a verified node JWT no longer authenticates its node (null: it does). */
function nodeRefusal(node: NodeRow | undefined, claims: NodeClaims): string | null {
  if (!node) return 'node is not registered: run "svc agent node register"';
  if (node.jti !== claims.jti) return 'node token was rotated by a later registration: use the new node.json';
  return null;
}

function nodePrincipal(node: NodeRow): Principal {
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

/** The credential of "Bearer <credential>", or null. */
function bearer(header: string): string | null {
  return /^Bearer\s+(\S+)\s*$/i.exec(header)?.[1] ?? null;
}

/** A lookup's failure as a re-check verdict: unauthenticated refuses; anything else is the
 * store not answering, which is not a revocation. */
function verdict(e: unknown): Recheck {
  return isSvcError(e) && e.code === 'unauthenticated'
    ? { ok: false, why: e.message }
    : { ok: 'unknown', err: e };
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
