// Turns an Authorization header into a Principal: service token, node JWT or OIDC JWT.
// Lookups are cached for at most `cacheMs` (default 1 s), which bounds how long a revoked
// or rotated credential keeps working on an open stream or a busy replica. recheck() serves
// the re-checks of open connections (credential-watch.ts) in bulk.
import { decodeProtectedHeader } from 'jose';
import { sql } from 'kysely';
import type { Clock } from '../../lib/clock.js';
import { isSvcError, SvcError } from '../../protocol/errors.js';
import type { Scope } from '../../protocol/scopes.js';
import type { Db, Dialect } from '../store/types.js';
import type { OidcVerifier } from './oidc.js';
import type { Principal } from './principal.js';
import { NODE_JWT_ISSUER, type NodeClaims, type SigningKeys } from './signing-keys.js';
import { findTokenByHash, hashToken, TOKEN_PREFIX } from './tokens.js';

export interface AuthenticatorDeps {
  db: Db;
  /** Which SQL the bulk re-check of node JWTs speaks. */
  dialect: Dialect;
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

/** Nodes one re-check query asks about. */
const RECHECK_BATCH = 5000;

/** A re-check's verdict on one credential: still good, refused (why), or not known this time
 * (the store did not answer: not a revocation). */
export type Recheck = { ok: true } | { ok: false; why: string } | { ok: 'unknown'; err: unknown };

/** The verdict of every credential still good (one object for all of them). */
const STILL_GOOD: Recheck = Object.freeze({ ok: true });

/**
 * A node JWT whose signature verified: its claims, the key that signed it, and the principal
 * it stands for (a node's hostname and domains never change: re-registering only rotates its
 * jti, which ends this JWT).
 */
type VerifiedNode = NodeClaims & {
  kid: string;
  principal: Principal;
  jwt: string;
  /** `["<node id>","<jti>"]`: this JWT's entry in a re-check's list (staleNodes). */
  pair: string;
};

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
  /** The verified node JWT each Authorization header re-checked before carries. */
  private nodeHeaders = new Map<string, VerifiedNode>();
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
    const principal = nodePrincipal(node as NodeRow);
    if (this.verifiedNodes.size > 100_000) this.verifiedNodes.clear();
    this.verifiedNodes.set(jwt, {
      ...claims,
      kid: decodeProtectedHeader(jwt).kid ?? '',
      principal,
      jwt,
      pair: JSON.stringify([claims.sub, claims.jti]),
    });
    return principal;
  }

  /**
   * Re-checks the credentials of open connections past the cache, so that a revocation made
   * on any replica shows at once. A node JWT verified before is not verified again: its key
   * must still be active, and its node's row must still name its jti, asked for all of them
   * with one query per RECHECK_BATCH nodes (a fleet's channels would otherwise cost a
   * signature check and a query each, every pass). Other credentials: one lookup each.
   */
  async recheck(headers: readonly string[]): Promise<Map<string, Recheck>> {
    const out = new Map<string, Recheck>();
    const nodeHeaders: string[] = [];
    const nodes: VerifiedNode[] = [];
    const singles: Promise<void>[] = [];
    for (const header of headers) {
      const node = this.verifiedNodeOf(header);
      if (node !== undefined) {
        nodeHeaders.push(header);
        nodes.push(node);
      } else
        singles.push(
          this.fromHeader(header, { fresh: true }).then(
            () => void out.set(header, STILL_GOOD),
            (e: unknown) => void out.set(header, verdict(e)),
          ),
        );
    }
    if (nodes.length > 0) {
      try {
        await this.recheckNodes(nodeHeaders, nodes, out);
      } catch (e) {
        for (const h of nodeHeaders) if (!out.has(h)) out.set(h, { ok: 'unknown', err: e });
      }
    }
    await Promise.all(singles);
    return out;
  }

  /** The verified node JWT `header` carries, or undefined (not a node JWT verified before). */
  private verifiedNodeOf(header: string): VerifiedNode | undefined {
    const known = this.nodeHeaders.get(header);
    // Still verified: a refused JWT leaves verifiedNodes (and may be verified anew).
    if (known !== undefined && this.verifiedNodes.get(known.jwt) === known) return known;
    const jwt = bearer(header);
    const node = jwt === null ? undefined : this.verifiedNodes.get(jwt);
    if (node === undefined) {
      if (known !== undefined) this.nodeHeaders.delete(header);
      return undefined;
    }
    if (this.nodeHeaders.size > 100_000) this.nodeHeaders.clear();
    this.nodeHeaders.set(header, node);
    return node;
  }

  /**
   * Re-checks verified node JWTs (`nodes[i]` carried by `headers[i]`), writing a verdict for
   * each header into `out`. A pass over a fleet's channels runs twice a second, so it
   * allocates next to nothing per node: only the nodes whose row no longer names their JWT's
   * jti come back from the store (none, mostly), and a good one's cache entry is renewed in
   * place. Reading every row back made garbage that lived just long enough to be promoted:
   * a replica with 2 500 channels grew by megabytes a second between full collections
   * (docs/perf-notes.md, "the re-check's garbage").
   */
  private async recheckNodes(
    headers: string[],
    nodes: VerifiedNode[],
    out: Map<string, Recheck>,
  ): Promise<void> {
    await this.deps.keys.freshen(FRESH_KEYS_MS);
    const refuse = (i: number, why: string) => {
      const n = nodes[i] as VerifiedNode;
      this.verifiedNodes.delete(n.jwt);
      this.cache.delete(n.jwt);
      out.set(headers[i] as string, { ok: false, why });
    };
    // Index loops: an entries() iterator would make a pair per node, every pass.
    const pairs: string[] = [];
    for (let i = 0; i < nodes.length; i++) {
      const n = nodes[i] as VerifiedNode;
      if (this.deps.keys.isActive(n.kid)) pairs.push(n.pair);
      else refuse(i, `invalid node token: unknown key id ${n.kid}`);
    }
    const stale = new Map<string, string | null>();
    for (let i = 0; i < pairs.length; i += RECHECK_BATCH) {
      const batch = pairs.length <= RECHECK_BATCH ? pairs : pairs.slice(i, i + RECHECK_BATCH);
      for (const r of await this.staleNodes(batch)) stale.set(r.id, r.jti);
    }
    const now = this.deps.clock.now();
    for (let i = 0; i < nodes.length; i++) {
      const n = nodes[i] as VerifiedNode;
      if (out.has(headers[i] as string)) continue;
      // A node's row comes back when any JWT of that node in this pass is stale (the old one,
      // while its replacement's channel is open too): it refuses only the JWTs it does not name.
      const jti = stale.get(n.sub);
      const refused = jti === undefined ? null : nodeRefusal(jti === null ? undefined : { jti }, n);
      if (refused !== null) {
        refuse(i, refused);
        continue;
      }
      out.set(headers[i] as string, STILL_GOOD);
      const cached = this.cache.get(n.jwt);
      if (cached !== undefined && cached.principal === n.principal) cached.at = now;
      else this.cache.set(n.jwt, { principal: n.principal, at: now });
    }
  }

  /**
   * Of the nodes of these verified JWTs (each JWT's `[id, jti]` pair, kept since it was
   * verified), those whose row is gone (jti null) or names another jti. The list goes as one
   * JSON text.
   */
  private async staleNodes(list: readonly string[]): Promise<{ id: string; jti: string | null }[]> {
    const pairs = `[${list.join(',')}]`;
    const query =
      this.deps.dialect === 'postgres'
        ? sql<{ id: string; jti: string | null }>`
            select e ->> 0 as id, n.jti from json_array_elements(${pairs}::json) e
            left join nodes n on n.id = e ->> 0
            where n.jti is distinct from e ->> 1`
        : sql<{ id: string; jti: string | null }>`
            select json_extract(e.value, '$[0]') as id, n.jti from json_each(${pairs}) e
            left join nodes n on n.id = json_extract(e.value, '$[0]')
            where n.jti is not json_extract(e.value, '$[1]')`;
    return (await query.execute(this.deps.db)).rows;
  }
}

/** Why a verified node JWT no longer authenticates its node (null: it does). */
function nodeRefusal(node: Pick<NodeRow, 'jti'> | undefined, claims: NodeClaims): string | null {
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
