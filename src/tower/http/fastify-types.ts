// Route-level declarations every tower route makes: which scope it needs (or that it is
// public), and the principal the auth hook attaches to the request.
import type { Scope } from '../../protocol/scopes.js';
import type { Principal } from '../auth/principal.js';

declare module 'fastify' {
  interface FastifyContextConfig {
    /** Required scope, or 'public' for unauthenticated routes. Every route must say. */
    scope?: Scope | 'public';
    /**
     * Tower-wide administration: besides the scope, the credential must be an admin for
     * every domain (auth/principal.ts isUnrestrictedAdmin), not one limited to some.
     */
    towerWide?: boolean;
    /** Skip the per-request rate limit (long-lived streams count once, at open). */
    rateLimitExempt?: boolean;
  }
  interface FastifyRequest {
    principal: Principal;
  }
}
