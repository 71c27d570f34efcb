// Authenticates every request against its route's declared scope, then applies the
// per-principal rate limit and sets RateLimit-* headers. A route that forgets to declare a
// scope fails at registration, so nothing is public by accident.
import type { FastifyInstance } from 'fastify';
import { SvcError } from '../../protocol/errors.js';
import { hasScope } from '../auth/principal.js';
import type { TowerContext } from '../context.js';
import type { RequestDeadline } from './deadline.js';
import { sendProblem } from './problem.js';

export function installAuth(app: FastifyInstance, ctx: TowerContext, deadline: RequestDeadline): void {
  app.addHook('onRoute', (route) => {
    if (route.method === 'HEAD' || (Array.isArray(route.method) && route.method.includes('HEAD'))) return;
    if (!route.config?.scope) {
      throw new Error(`route ${String(route.method)} ${route.url} declares no scope (config.scope)`);
    }
  });

  app.addHook('onRequest', async (req, reply) => {
    const scope = req.routeOptions.config?.scope;
    if (scope === undefined || scope === 'public') return;
    const header = req.headers.authorization ?? queryToken(req.url);
    // A store that hangs must not hold the request past its deadline here either.
    const principal = await deadline.within(req, reply, ctx.auth.fromHeader(header));
    if (!principal) return; // answered already (cannot happen before the handler; for types)
    if (!hasScope(principal, scope)) {
      throw new SvcError(
        'forbidden',
        `this route needs the "${scope}" scope; the credential has ${principal.scopes.join(', ') || 'none'}`,
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
 * Browsers cannot set headers on EventSource or WebSocket: those routes also accept
 * ?access_token= (the console uses short-lived credentials for it).
 */
function queryToken(url: string): string | undefined {
  const q = url.indexOf('?');
  if (q < 0) return undefined;
  const token = new URLSearchParams(url.slice(q + 1)).get('access_token');
  return token ? `Bearer ${token}` : undefined;
}
