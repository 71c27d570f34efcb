// Builds the tower's Fastify app: validation, problem+json errors, auth and rate limits,
// metrics and health routes. The composition root (tower.ts) then registers one plugin per
// area with the dependencies that area uses. Route tests use app.inject().
import type { FastifyInstance, FastifyServerOptions } from 'fastify';
import Fastify, { LogController } from 'fastify';
import type { Logger } from '../../lib/log.js';
import { SvcError } from '../../protocol/errors.js';
import type { StoreHealth } from '../store/health.js';
import type { Readiness } from '../store/readiness.js';
import { type AuthHookDeps, installAuth } from './auth-hook.js';
import { RequestDeadline } from './deadline.js';
import { createMetrics, installMetrics, type TowerMetrics } from './metrics.js';
import { installProblemHandlers } from './problem.js';
import { createValidatorCompiler, installTextRule } from './validation.js';
import './fastify-types.js';

/** What the app itself uses: the clock and log, the body limit, and the auth hook's parts. */
export interface AppDeps extends AuthHookDeps {
  log: Logger;
  bodyLimitBytes: number;
}

export interface BuildAppOptions {
  https?: { cert: Buffer; key: Buffer };
  metrics?: TowerMetrics;
  /** Every request's deadline (default DEFAULT_REQUEST_DEADLINE_MS on deps.clock). */
  deadline?: RequestDeadline;
  /** What /readyz answers (default: ready whenever asked). */
  readiness?: () => Promise<Readiness>;
  /** Told of store faults that reach the error handler outside the write path. */
  health?: StoreHealth;
}

export async function buildApp(deps: AppDeps, opts: BuildAppOptions): Promise<FastifyInstance> {
  const serverOpts: FastifyServerOptions & { https?: { cert: Buffer; key: Buffer } } = {
    loggerInstance: deps.log.child({ component: 'http' }),
    // Per-request lines would dominate the log; metrics count requests instead.
    logController: new LogController({ disableRequestLogging: true }),
    bodyLimit: deps.bodyLimitBytes,
    // Idle keep-alive sockets close at shutdown; in-flight requests finish first.
    forceCloseConnections: 'idle',
    return503OnClosing: true,
    routerOptions: { ignoreTrailingSlash: true },
  };
  if (opts.https) serverOpts.https = opts.https;
  const app = Fastify(serverOpts) as unknown as FastifyInstance;
  app.setValidatorCompiler(createValidatorCompiler());
  installTextRule(app);
  const health = opts.health;
  installProblemHandlers(app, health ? { onStoreFault: (f) => health.failed(f) } : {});
  // Before auth: the deadline covers the auth lookup too.
  const deadline = opts.deadline ?? new RequestDeadline(deps.clock);
  deadline.install(app);
  installAuth(app, deps, deadline);
  const metrics = opts.metrics ?? createMetrics();
  installMetrics(app, metrics);

  app.get('/healthz', { config: { scope: 'public' } }, async () => ({ status: 'ok' }));
  // Bounded by the readiness probe's own budget (under 2 s), well inside the deadline.
  const readiness = opts.readiness ?? (async (): Promise<Readiness> => ({ ready: true }));
  app.get('/readyz', { config: { scope: 'public' } }, async () => {
    const r = await readiness();
    if (!r.ready) throw new SvcError('unavailable', `not ready: ${r.reason}`, { retryAfter: 1 });
    return { status: 'ready' };
  });
  // Metrics need a credential like everything else; a feed:read token is enough to scrape.
  app.get('/metrics', { config: { scope: 'feed:read' } }, async (_req, reply) => {
    reply.type(metrics.registry.contentType);
    return metrics.registry.metrics();
  });

  return app;
}
