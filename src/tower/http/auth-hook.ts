// Authenticates every request against its route's declared scope, then applies the
// per-principal rate limit and sets RateLimit-* headers. A route that forgets to declare a
// scope fails at registration, so nothing is public by accident.
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { SvcError } from '../../protocol/errors.js';
import { hasScope, isUnrestrictedAdmin } from '../auth/principal.js';
import type { TowerContext } from '../context.js';
import { sendProblem } from './problem.js';

export function installAuth(app: FastifyInstance, ctx: TowerContext): void {
  app.addHook('onRoute', (route) => {
    if (route.method === 'HEAD' || (Array.isArray(route.method) && route.method.includes('HEAD'))) return;
    if (!route.config?.scope) {
      throw new Error(`route ${String(route.method)} ${route.url} declares no scope (config.scope)`);
    }
  });

  app.addHook('onRequest', async (req, reply) => {
    const scope = req.routeOptions.config?.scope;
    if (scope === undefined || scope === 'public') return;
    const header = credentialHeader(req);
    const principal = await ctx.auth.fromHeader(header);
    if (!hasScope(principal, scope)) {
      throw new SvcError(
        'forbidden',
        `this route needs the "${scope}" scope; the credential has ${principal.scopes.join(', ') || 'none'}`,
      );
    }
    if (req.routeOptions.config?.towerWide && !isUnrestrictedAdmin(principal)) {
      throw new SvcError(
        'forbidden',
        `this route is tower-wide administration: it needs an admin credential for every domain (this one is limited to ${principal.domains?.join(', ') || 'no domain'})`,
      );
    }
    req.principal = principal;
    if (!ctx.rateLimiter.enabled || req.routeOptions.config?.rateLimitExempt) return;
    const d = ctx.rateLimiter.take(principal.id, ctx.clock.now());
    const resetSeconds = Math.max(0, Math.ceil((d.resetAt - ctx.clock.now()) / 1000));
    reply.header('RateLimit-Limit', String(d.limit));
    reply.header('RateLimit-Remaining', String(d.remaining));
    reply.header('RateLimit-Reset', String(resetSeconds));
    if (!d.allowed) {
      return sendProblem(
        reply,
        new SvcError(
          'rate_limited',
          `rate limit of ${d.limit} requests exceeded; retry in ${resetSeconds} s`,
          {
            retryAfter: resetSeconds,
          },
        ),
      );
    }
  });
}

/**
 * The credential a request was made with, as an Authorization header value ('' for none):
 * what long-lived connections hand the credential watch to re-check.
 */
export function credentialHeader(req: FastifyRequest): string {
  return req.headers.authorization ?? queryToken(req.url) ?? '';
}

/**
 * Browsers cannot set headers on EventSource or WebSocket: those routes also accept
 * ?access_token= (the console uses short-lived credentials for it).
 */
function queryToken(url: string): string | undefined {
  const q = url.indexOf('?');
  if (q < 0) return undefined;
  const token = new URLSearchParams(url.slice(q + 1)).get('access_token');
  return token ? `Bearer ${token}` : undefined;
}
