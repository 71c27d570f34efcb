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
