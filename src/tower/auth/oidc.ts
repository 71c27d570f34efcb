// OIDC bearer JWTs: verified against the configured issuer's JWKS (discovered from
// /.well-known/openid-configuration), keys chosen by kid; jose refetches the key set when
// a token names a kid it has not seen, which is how issuer key rotation is followed.
import { createRemoteJWKSet, type JWTPayload, jwtVerify } from 'jose';
import type { Clock } from '../../lib/clock.js';
import { SvcError } from '../../protocol/errors.js';
import { isScope, type Scope } from '../../protocol/scopes.js';
import type { Principal } from './principal.js';

export interface OidcOptions {
  issuer: string;
  audience: string;
  /** Claim holding the domain ids the user may see (array of strings). */
  domainsClaim?: string;
  /** Minimum time between JWKS refetches for unknown kids (jose's cooldown), ms. */
  jwksCooldownMs?: number;
}

export type OidcVerifier = (jwt: string) => Promise<Principal>;

export function createOidcVerifier(opts: OidcOptions, clock: Clock): OidcVerifier {
  let jwks: ReturnType<typeof createRemoteJWKSet> | null = null;
  const issuer = opts.issuer.replace(/\/+$/, '');
  const domainsClaim = opts.domainsClaim ?? 'svc_domains';

  async function keySet() {
    if (jwks) return jwks;
    const res = await fetch(`${issuer}/.well-known/openid-configuration`);
    if (!res.ok) throw new Error(`OIDC discovery at ${issuer} answered ${res.status}`);
    const doc = (await res.json()) as { jwks_uri?: unknown };
    if (typeof doc.jwks_uri !== 'string') throw new Error('OIDC discovery document has no jwks_uri');
    jwks = createRemoteJWKSet(new URL(doc.jwks_uri), { cooldownDuration: opts.jwksCooldownMs ?? 30_000 });
    return jwks;
  }

  return async (jwt) => {
    let payload: JWTPayload;
    try {
      ({ payload } = await jwtVerify(jwt, await keySet(), {
        issuer: opts.issuer,
        audience: opts.audience,
        currentDate: new Date(clock.now()),
      }));
    } catch (e) {
      throw new SvcError('unauthenticated', `invalid OIDC token: ${(e as Error).message}`);
    }
    const scopes = readScopes(payload);
    const claim = payload[domainsClaim];
    const domains = Array.isArray(claim) ? claim.filter((d): d is string => typeof d === 'string') : null;
    return {
      kind: 'oidc',
      id: `oidc:${payload.sub ?? 'unknown'}`,
      name: typeof payload.email === 'string' ? payload.email : (payload.sub ?? 'oidc user'),
      scopes,
      // Without a domains claim only admins see every domain; others see none.
      domains: domains ?? (scopes.includes('admin') ? null : []),
      expiresAt: typeof payload.exp === 'number' ? payload.exp * 1000 : null,
    };
  };
}

function readScopes(payload: JWTPayload): Scope[] {
  const raw = payload.scope ?? payload.scp;
  const list = typeof raw === 'string' ? raw.split(/\s+/) : Array.isArray(raw) ? raw : [];
  return list.filter((s): s is Scope => typeof s === 'string' && isScope(s));
}
