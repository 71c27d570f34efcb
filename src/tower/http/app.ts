// Builds the tower's Fastify app: validation, problem+json errors, auth and rate limits,
// metrics, health routes, then one plugin per area. Route tests use app.inject().
import type { FastifyInstance, FastifyServerOptions } from 'fastify';
import Fastify, { LogController } from 'fastify';
import { sql } from 'kysely';
import { SvcError } from '../../protocol/errors.js';
import type { TowerContext } from '../context.js';
import { installAuth } from './auth-hook.js';
import { createMetrics, installMetrics, type TowerMetrics } from './metrics.js';
import { installProblemHandlers } from './problem.js';
import { createValidatorCompiler } from './validation.js';
import './fastify-types.js';

export type TowerPlugin = (app: FastifyInstance, ctx: TowerContext) => void | Promise<void>;

export interface BuildAppOptions {
  https?: { cert: Buffer; key: Buffer };
  plugins: TowerPlugin[];
  metrics?: TowerMetrics;
}

export async function buildApp(ctx: TowerContext, opts: BuildAppOptions): Promise<FastifyInstance> {
  const serverOpts: FastifyServerOptions & { https?: { cert: Buffer; key: Buffer } } = {
    loggerInstance: ctx.log.child({ component: 'http' }),
    // Per-request lines would dominate the log; metrics count requests instead.
    logController: new LogController({ disableRequestLogging: true }),
    bodyLimit: ctx.config.bodyLimitBytes,
    // Idle keep-alive sockets close at shutdown; in-flight requests finish first.
    forceCloseConnections: 'idle',
    return503OnClosing: true,
    routerOptions: { ignoreTrailingSlash: true },
  };
  if (opts.https) serverOpts.https = opts.https;
  const app = Fastify(serverOpts) as unknown as FastifyInstance;
  app.setValidatorCompiler(createValidatorCompiler());
  installProblemHandlers(app);
  installAuth(app, ctx);
  const metrics = opts.metrics ?? createMetrics();
  installMetrics(app, metrics);

  app.get('/healthz', { config: { scope: 'public' } }, async () => ({ status: 'ok' }));
  app.get('/readyz', { config: { scope: 'public' } }, async () => {
    try {
      await sql`select 1`.execute(ctx.store.db);
    } catch (e) {
      throw new SvcError('unavailable', `store unreachable: ${(e as Error).message}`);
    }
    return { status: 'ready' };
  });
  // Metrics need a credential like everything else; a feed:read token is enough to scrape.
  app.get('/metrics', { config: { scope: 'feed:read' } }, async (_req, reply) => {
    reply.type(metrics.registry.contentType);
    return metrics.registry.metrics();
  });

  for (const plugin of opts.plugins) await plugin(app, ctx);
  return app;
}
