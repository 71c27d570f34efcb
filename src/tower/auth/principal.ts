// Who asks: the result of authenticating one request or stream.
import type { Scope } from '../../protocol/scopes.js';
import { scopeSatisfies } from '../../protocol/scopes.js';

export interface Principal {
  kind: 'token' | 'oidc' | 'node';
  /** Stable key for rate limits and audit: token id, "oidc:<sub>", or node id. */
  id: string;
  name: string;
  scopes: Scope[];
  /** Domain ids this principal may see, or null for all. */
  domains: string[] | null;
  /** When the credential stops being valid (ms), or null. */
  expiresAt: number | null;
  /** Set for node principals. */
  nodeId?: string;
}

export function canSeeDomain(p: Principal, domainId: string): boolean {
  return p.domains === null || p.domains.includes(domainId);
}

export function hasScope(p: Principal, scope: Scope): boolean {
  return scopeSatisfies(p.scopes, scope);
}

/**
 * Tower-wide administration (signing keys, the master key, creating and deleting domains,
 * every principal's tokens) needs the admin scope on every domain; a node never has it.
 */
export function isUnrestrictedAdmin(p: Principal): boolean {
  return p.kind !== 'node' && p.domains === null && hasScope(p, 'admin');
}

/** True when every domain of `domains` (null: all) is one `p` may see. */
export function coversDomains(p: Principal, domains: readonly string[] | null): boolean {
  if (p.domains === null) return true;
  return domains?.every((d) => canSeeDomain(p, d)) ?? false;
}

/**
 * Why `p` may not grant these scopes and domains, or null when it may: grants never widen.
 * Each scope must be one `p` holds (or implies) and the domains a subset of its own; a
 * credential limited to domains must name them (null would mean every domain).
 */
export function grantRefusal(
  p: Principal,
  scopes: readonly Scope[],
  domains: readonly string[] | null,
): string | null {
  const wider = scopes.find((s) => !hasScope(p, s));
  if (wider) return `this credential does not hold the "${wider}" scope, so it cannot grant it`;
  if (!coversDomains(p, domains)) {
    const limited = (p.domains ?? []).join(', ') || 'none';
    return domains === null
      ? `this credential is limited to domains ${limited}: give "domains" as a subset of them`
      : `this credential is limited to domains ${limited}: it cannot grant ${domains.filter((d) => !canSeeDomain(p, d)).join(', ')}`;
  }
  return null;
}
