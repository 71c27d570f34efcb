// Builds the tower's Fastify app: validation, problem+json errors, auth and rate limits,
// metrics, health routes, then one plugin per area. Route tests use app.inject().
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
import { VERSION } from '../../lib/version.js';
import { SvcError } from '../../protocol/errors.js';
import type { TowerContext } from '../context.js';
import type { StoreHealth } from '../store/health.js';
import type { Readiness } from '../store/readiness.js';
import { installAuth } from './auth-hook.js';
import { RequestDeadline } from './deadline.js';
import { createMetrics, installMetrics, type TowerMetrics } from './metrics.js';
import { installOpenApi, openapiRoute } from './openapi.js';
import { installProblemHandlers } from './problem.js';
import { healthSchemas } from './schemas.js';
import { sharedSerializers } from './serializers.js';
import { createValidatorCompiler, installTextRule } from './validation.js';
import './fastify-types.js';

/** The app as routes see it: requests and replies typed from the route's TypeBox schemas. */
export type TowerApp = FastifyInstance<
  RawServerDefault,
  RawRequestDefaultExpression,
  RawReplyDefaultExpression,
  FastifyBaseLogger,
  TypeBoxTypeProvider
>;

export type TowerPlugin = (app: TowerApp, ctx: TowerContext) => void | Promise<void>;

export interface BuildAppOptions {
  https?: { cert: Buffer; key: Buffer };
  plugins: TowerPlugin[];
  metrics?: TowerMetrics;
  /** Every request's deadline (default DEFAULT_REQUEST_DEADLINE_MS on ctx.clock). */
  deadline?: RequestDeadline;
  /** What /readyz answers (default: ready whenever asked). */
  readiness?: () => Promise<Readiness>;
  /** Told of store faults that reach the error handler outside the write path. */
  health?: StoreHealth;
  /** Told of every route as it is added (tests list the app's routes). */
  onRoute?: (route: RouteOptions) => void;
}

export async function buildApp(ctx: TowerContext, opts: BuildAppOptions): Promise<TowerApp> {
  const serverOpts: FastifyServerOptions & { https?: { cert: Buffer; key: Buffer } } = {
    loggerInstance: ctx.log.child({ component: 'http' }),
    // Per-request lines would dominate the log; metrics count requests instead.
    logController: new LogController({ disableRequestLogging: true }),
    bodyLimit: ctx.config.bodyLimitBytes,
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
  const deadline = opts.deadline ?? new RequestDeadline(ctx.clock);
  deadline.install(app);
  installAuth(app, ctx, deadline);
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
      return metrics.registry.metrics();
    },
  );

  for (const plugin of opts.plugins) await plugin(app, ctx);
  openapiRoute(app);
  return app;
}
