// Builds the tower's Fastify app: validation, problem+json errors, auth and rate limits,
// metrics and health routes. The composition root (tower.ts) then registers one plugin per
// area with the dependencies that area uses, and last the OpenAPI document's route
// (openapiRoute). Route tests use app.inject().
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import type {
  FastifyBaseLogger,
  FastifyInstance,
  FastifyServerOptions,
  RawReplyDefaultExpression,
  RawRequestDefaultExpression,
  RawServerDefault,
  RouteOptions,
} from 'fastify';
import Fastify, { LogController } from 'fastify';
import type { Logger } from '../../lib/log.js';
import { VERSION } from '../../lib/version.js';
import { SvcError } from '../../protocol/errors.js';
import type { StoreHealth } from '../store/health.js';
import type { Readiness } from '../store/readiness.js';
import { type AuthHookDeps, installAuth } from './auth-hook.js';
import { RequestDeadline } from './deadline.js';
import { createMetrics, installMetrics, scrape, type TowerMetrics } from './metrics.js';
import { installOpenApi } from './openapi.js';
import { installProblemHandlers } from './problem.js';
import { healthSchemas } from './schemas.js';
import { sharedSerializers } from './serializers.js';
import { createValidatorCompiler, installTextRule } from './validation.js';
import './fastify-types.js';

/**
 * The app as routes see it: requests and replies typed from the route's TypeBox schemas.
 * Each area's plugin takes it as its instance: `fp(async (app: TowerApp, deps: …) => …)`.
 */
export type TowerApp = FastifyInstance<
  RawServerDefault,
  RawRequestDefaultExpression,
  RawReplyDefaultExpression,
  FastifyBaseLogger,
  TypeBoxTypeProvider
>;

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
  /** Told of every route as it is added (tests list the app's routes). */
  onRoute?: (route: RouteOptions) => void;
}

export async function buildApp(deps: AppDeps, opts: BuildAppOptions): Promise<TowerApp> {
  const serverOpts: FastifyServerOptions & { https?: { cert: Buffer; key: Buffer } } = {
    loggerInstance: deps.log.child({ component: 'http' }),
    // Per-request lines would dominate the log; metrics count requests instead.
    logController: new LogController({ disableRequestLogging: true }),
    bodyLimit: deps.bodyLimitBytes,
    // Idle keep-alive sockets close at shutdown; in-flight requests finish first.
    forceCloseConnections: 'idle',
    return503OnClosing: true,
    routerOptions: { ignoreTrailingSlash: true },
    schemaController: { compilersFactory: { buildSerializer: sharedSerializers() } },
  };
  if (opts.https) serverOpts.https = opts.https;
  const app = (Fastify(serverOpts) as unknown as FastifyInstance).withTypeProvider<TypeBoxTypeProvider>();
  app.setValidatorCompiler(createValidatorCompiler());
  if (opts.onRoute) app.addHook('onRoute', opts.onRoute);
  // Before any route: the document generator collects routes as they are added.
  await installOpenApi(app, { version: VERSION });
  installTextRule(app);
  const health = opts.health;
  installProblemHandlers(app, health ? { onStoreFault: (f) => health.failed(f) } : {});
  // Before auth: the deadline covers the auth lookup too.
  const deadline = opts.deadline ?? new RequestDeadline(deps.clock);
  deadline.install(app);
  installAuth(app, deps, deadline);
  const metrics = opts.metrics ?? createMetrics();
  installMetrics(app, metrics);

  app.get('/healthz', { config: { scope: 'public' }, schema: healthSchemas.healthz }, async () => ({
    status: 'ok' as const,
  }));
  // Bounded by the readiness probe's own budget (under 2 s), well inside the deadline.
  const readiness = opts.readiness ?? (async (): Promise<Readiness> => ({ ready: true }));
  app.get('/readyz', { config: { scope: 'public' }, schema: healthSchemas.readyz }, async () => {
    const r = await readiness();
    if (!r.ready) throw new SvcError('unavailable', `not ready: ${r.reason}`, { retryAfter: 1 });
    return { status: 'ready' as const };
  });
  // Metrics need a credential like everything else; a feed:read token is enough to scrape.
  app.get(
    '/metrics',
    { config: { scope: 'feed:read' }, schema: healthSchemas.metrics },
    async (_req, reply) => {
      reply.type(metrics.registry.contentType);
      return scrape(metrics);
    },
  );

  return app;
}
