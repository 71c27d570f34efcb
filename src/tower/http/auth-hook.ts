// Authenticates every request against its route's declared scope, then applies the
// per-principal rate limit and sets RateLimit-* headers. Before authentication, a client
// address that has failed to authenticate too often this window is refused (429), so guessing
// credentials costs time and the store no lookups. A route that forgets to declare a scope
// fails at registration, so nothing is public by accident.
import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { Clock } from '../../lib/clock.js';
import { isSvcError, SvcError } from '../../protocol/errors.js';
import type { Authenticator } from '../auth/authenticate.js';
import { hasScope, isUnrestrictedAdmin, type Principal } from '../auth/principal.js';
import type { RequestDeadline } from './deadline.js';
import { sendProblem } from './problem.js';
import type { RateLimiter } from './rate-limit.js';

/** Failed authentications per client address, and the clock they are counted on. */
export interface AddressLimitDeps {
  clock: Clock;
  /**
   * Failed authentications per client address: once an address has spent its window, its
   * requests are refused (429) before any credential is looked up.
   */
  authFailures: RateLimiter;
}

export interface AuthHookDeps extends AddressLimitDeps {
  auth: Authenticator;
  /** Requests per principal and window. */
  rateLimiter: RateLimiter;
}

export function installAuth(app: FastifyInstance, deps: AuthHookDeps, deadline: RequestDeadline): void {
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
    // A credential this replica already knows is not a guess: it passes even from an address
    // that others used up (another local user must not lock out the node on this machine).
    const refused = deps.auth.knownCredential(header) ? null : addressRefusal(deps, req.ip);
    if (refused) return sendProblem(reply, refused);
    let principal: Principal | undefined;
    try {
      // A store that hangs must not hold the request past its deadline here either.
      principal = await deadline.within(req, reply, deps.auth.fromHeader(header));
    } catch (e) {
      countAuthFailure(deps, req.ip, e);
      throw e;
    }
    if (!principal) return; // answered already (cannot happen before the handler; for types)
    if (!hasScope(principal, scope)) {
      throw new SvcError(
        'forbidden',
        `this route needs the "${scope}" scope; the credential has ${principal.scopes.join(', ') || 'none'}`,
      );
    }
    if (req.routeOptions.config?.towerWide) requireTowerWide(principal);
    req.principal = principal;
    if (!deps.rateLimiter.enabled || req.routeOptions.config?.rateLimitExempt) return;
    const d = deps.rateLimiter.take(principal.id, deps.clock.now());
    const resetSeconds = Math.max(0, Math.ceil((d.resetAt - deps.clock.now()) / 1000));
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

/** The 429 for an address whose failed authentications used up this window, or null. */
export function addressRefusal(deps: AddressLimitDeps, address: string): SvcError | null {
  if (!deps.authFailures.enabled) return null;
  const now = deps.clock.now();
  const d = deps.authFailures.peek(address, now);
  if (d.remaining > 0) return null;
  const retryAfter = Math.max(1, Math.ceil((d.resetAt - now) / 1000));
  return new SvcError(
    'rate_limited',
    `too many failed authentications from ${address} (limit ${d.limit}); retry in ${retryAfter} s`,
    { retryAfter },
  );
}

/** Counts a failed authentication against the client address (other errors do not count). */
export function countAuthFailure(deps: AddressLimitDeps, address: string, e: unknown): void {
  if (isSvcError(e) && e.code === 'unauthenticated') deps.authFailures.take(address, deps.clock.now());
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

/** Refuses a principal limited to domains where a route is tower-wide (config.towerWide). */
export function requireTowerWide(principal: Principal): void {
  if (!isUnrestrictedAdmin(principal)) {
    throw new SvcError(
      'forbidden',
      `this route is tower-wide administration: it needs an admin credential for every domain (this one is limited to ${principal.domains?.join(', ') || 'no domain'})`,
    );
  }
}
