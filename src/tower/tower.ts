// The tower's composition root: opens the store, migrates, prepares keys and the bootstrap
// admin token, builds the HTTP app with every area's plugin, and owns start/stop. One
// instance per process; start() and stop() are idempotent.
import { join } from 'node:path';
import type { Duplex } from 'node:stream';
import type { FastifyInstance, RouteOptions } from 'fastify';
import type { Clock } from '../lib/clock.js';
import { systemClock } from '../lib/clock.js';
import type { Logger } from '../lib/log.js';
import { Signal } from '../lib/signal.js';
import { attachRoutes } from './attach/routes.js';
import { Authenticator } from './auth/authenticate.js';
import { CredentialWatch } from './auth/credential-watch.js';
import { createOidcVerifier, type OidcOptions } from './auth/oidc.js';
import { authRoutes } from './auth/routes.js';
import { SigningKeys } from './auth/signing-keys.js';
import { bootstrapAdminToken } from './auth/tokens.js';
import { consoleRoutes } from './console/plugin.js';
import type { TowerConfig, TowerContext } from './context.js';
import { approvalRoutes } from './feed/approvals.js';
import { FeedHub } from './feed/hub.js';
import { startPruner } from './feed/retention.js';
import { feedRoutes } from './feed/routes.js';
import { createSequencer } from './feed/sequencer.js';
import { FeedStats } from './feed/stats.js';
import { buildApp, type TowerPlugin } from './http/app.js';
import { RequestDeadline } from './http/deadline.js';
import { createMetrics } from './http/metrics.js';
import { RateLimiter } from './http/rate-limit.js';
import { meshTaskBlocks } from './mesh/event-codec.js';
import { mcpRoutes } from './mesh/mcp.js';
import { meshRoutes } from './mesh/routes.js';
import { createMeshService, type MeshService } from './mesh/service.js';
import { ControlHub, controlRoutes } from './nodes/control-hub.js';
import { nodeRequestRoutes } from './nodes/routes.js';
import { createTaskRelay } from './nodes/task-relay.js';
import { recordRoutes } from './records/routes.js';
import { type AgentLookup, agentsTableLookup } from './secrets/agents.js';
import { secretRoutes } from './secrets/routes.js';
import { StoreHealth } from './store/health.js';
import { migrate, openStore, type Store } from './store/open.js';
import type { StoreTimeouts } from './store/pg-connection.js';
import { createPgListener, type PgListener } from './store/pg-listen.js';
import { createReadiness } from './store/readiness.js';
import { createWrite } from './store/tx.js';

export interface TowerOptions {
  /** postgres://… or undefined for SQLite in dataDir. */
  database?: string;
  dataDir: string;
  log: Logger;
  clock?: Clock;
  tls?: { cert: Buffer; key: Buffer };
  oidc?: OidcOptions;
  /** Requests per window per principal; 0 disables. */
  rateLimit?: { limit: number; windowMs: number };
  /** Failed authentications per window per client address, checked before authentication; 0 disables. */
  authFailureLimit?: { limit: number; windowMs: number };
  eventRetentionMs?: number;
  /** Per-message deflate on /events/ws for clients that ask (default off). */
  wsCompression?: boolean;
  bodyLimitBytes?: number;
  /** Auth lookup cache, ms (bounds revocation delay). */
  authCacheMs?: number;
  /** Text of SVC_MASTER_KEY (read at the CLI edge); default: <dataDir>/master.key. */
  masterKey?: string;
  /** How the secrets area finds an agent's node and domain (default: the agents table). */
  agentLookup?: AgentLookup;
  /** The built web console served at / (default: dist/console of this package). */
  consoleDir?: string;
  /** Origins besides the tower's own that browsers may open /api/attach-ws from. */
  attachOrigins?: string[];
  /** PostgreSQL connect and statement timeouts (docs/operations.md). */
  storeTimeouts?: StoreTimeouts;
  /** Every request is answered within this (ms), 503 if the store did not let it finish. */
  requestDeadlineMs?: number;
  /** Told of every route as it is added (tests list the app's routes). */
  onRoute?: (route: RouteOptions) => void;
  /** SQLite: how long a write waits for another process's lock (ms). */
  busyTimeoutMs?: number;
  /** PostgreSQL: mesh lease-holding statements of one kind under way at once (default 4). */
  meshInFlight?: number;
}

export interface Tower {
  ctx: TowerContext;
  app: FastifyInstance;
  /** The mesh task operations (tests and bench/queue call them in-process). */
  mesh: MeshService;
  /** Listens on host:port (port 0 picks a free one); returns the base URL. */
  listen(host: string, port: number): Promise<string>;
  stop(): Promise<void>;
}

export const DEFAULT_RATE_LIMIT = { limit: 6000, windowMs: 60_000 };
/** 2 a second sustained: a person mistyping a token never meets it, a guesser is slowed 10 000×. */
export const DEFAULT_AUTH_FAILURE_LIMIT = { limit: 120, windowMs: 60_000 };

export async function createTower(opts: TowerOptions): Promise<Tower> {
  const clock = opts.clock ?? systemClock;
  const log = opts.log;
  const storeLog = log.child({ component: 'store' });
  const store: Store = await openStore({
    database: opts.database,
    dataDir: opts.dataDir,
    ...(opts.storeTimeouts ? { timeouts: opts.storeTimeouts } : {}),
    // Pool connections that broke are replaced on next use; requests on them got a 503.
    onConnectionError: (e) => storeLog.warn({ err: e.message }, 'a store connection broke'),
  });
  let stopSequencer = async () => {};
  let stopFeed = async () => {};
  let listener: PgListener | null = null;
  try {
    const applied = await migrate(store, clock);
    if (applied.length > 0) log.info({ applied, store: store.describe }, 'store migrated');
    const keys = new SigningKeys(store.db, store.dialect, clock);
    await keys.init();
    const eventsCommitted = new Signal<void>((e) => log.error({ err: e }, 'events listener failed'));
    // SQLite events are readable at commit; PostgreSQL ones once below the sequencer's watermark.
    const sequencer = createSequencer({ store, clock, log, sequenced: eventsCommitted });
    const health = new StoreHealth({ clock, log: storeLog, describe: store.describe });
    const write = createWrite(
      store,
      clock,
      () => (store.dialect === 'postgres' ? sequencer.kick() : eventsCommitted.emit()),
      { health, ...(opts.busyTimeoutMs !== undefined ? { busyTimeoutMs: opts.busyTimeoutMs } : {}) },
    );
    await sequencer.start();
    stopSequencer = () => sequencer.stop();
    const config: TowerConfig = {
      dataDir: opts.dataDir,
      eventRetentionMs: opts.eventRetentionMs ?? 7 * 86_400_000,
      bodyLimitBytes: opts.bodyLimitBytes ?? 1024 * 1024,
    };
    const auth = new Authenticator({
      db: store.db,
      clock,
      keys,
      oidc: opts.oidc ? createOidcVerifier(opts.oidc, clock) : null,
      cacheMs: opts.authCacheMs,
    });
    const shutdown = new AbortController();
    const nodes = new ControlHub(clock);
    const credentials = new CredentialWatch({ auth, clock, log });
    const ctx: TowerContext = {
      nodes,
      clock,
      log,
      store,
      config,
      write,
      eventsCommitted,
      auth,
      credentials,
      keys,
      rateLimiter: new RateLimiter(opts.rateLimit ?? DEFAULT_RATE_LIMIT),
      authFailures: new RateLimiter(opts.authFailureLimit ?? DEFAULT_AUTH_FAILURE_LIMIT),
      shutdown: shutdown.signal,
    };
    const adminFile = join(opts.dataDir, 'admin.token');
    const admin = await bootstrapAdminToken(write, store.dialect, adminFile);
    if (admin) log.info({ file: adminFile }, 'created the bootstrap admin token');

    // One LISTEN connection for every channel of this replica (PostgreSQL).
    listener = store.pgConfig ? createPgListener({ config: store.pgConfig, clock, log }) : null;
    const hub = new FeedHub({
      store,
      clock,
      log,
      onLocalCommit: (l) => eventsCommitted.on(l),
      listener,
      blocks: [meshTaskBlocks],
    });
    await hub.start();
    const stopPruning = startPruner({ store, clock, log, retentionMs: config.eventRetentionMs });
    // task_ready and task_cancelled to the nodes of every replica (PostgreSQL NOTIFY between
    // replicas).
    const taskRelay = createTaskRelay({ store, nodes, log, listener });
    await taskRelay.start();
    // Every channel is subscribed: listen (retrying in the background if it cannot yet).
    await listener?.start();
    const mesh = createMeshService({
      dialect: store.dialect,
      db: store.db,
      write,
      clock,
      log,
      hooks: {
        onClaimable: (task) => taskRelay.ready(task),
        onCancelled: (task) => {
          if (task.claimed_by) taskRelay.cancelled({ id: task.id, claimed_by: task.claimed_by });
        },
      },
      ...(opts.meshInFlight !== undefined ? { inFlight: opts.meshInFlight } : {}),
    });
    const stopSweeper = mesh.startSweeper();
    stopFeed = async () => {
      await stopSweeper();
      await taskRelay.stop();
      stopPruning();
      await hub.stop();
      await listener?.stop();
    };
    const metrics = createMetrics();
    const feedStats = new FeedStats();
    feedStats.register(metrics.registry);
    const plugins: TowerPlugin[] = [
      feedRoutes({ hub, stats: feedStats, wsCompression: opts.wsCompression ?? false }),
      approvalRoutes({ agents: opts.agentLookup ?? agentsTableLookup }),
      async (app) => {
        await app.register(meshRoutes, { mesh, db: store.db, write });
      },
      (app, ctx) => mcpRoutes(app, ctx, mesh),
      controlRoutes(nodes),
      nodeRequestRoutes(nodes, opts.agentLookup ? { agents: opts.agentLookup } : {}),
      attachRoutes({
        ...(opts.attachOrigins ? { allowedOrigins: opts.attachOrigins } : {}),
        ...(opts.agentLookup ? { agents: opts.agentLookup } : {}),
      }),
      authRoutes((id) => nodes.isOnline(id)),
      recordRoutes(),
      secretRoutes({
        ...(opts.masterKey !== undefined ? { masterKey: opts.masterKey } : {}),
        ...(opts.agentLookup ? { agents: opts.agentLookup } : {}),
      }),
      consoleRoutes(opts.consoleDir ? { dir: opts.consoleDir } : {}),
    ];
    const app = await buildApp(ctx, {
      plugins,
      metrics,
      health,
      readiness: createReadiness({ store, health, write, clock }),
      deadline: new RequestDeadline(clock, opts.requestDeadlineMs),
      ...(opts.onRoute ? { onRoute: opts.onRoute } : {}),
      ...(opts.tls ? { https: opts.tls } : {}),
    });
    // Upgraded sockets (WebSockets, and upgrades refused with 401/403) are not tracked by the
    // HTTP server: a refused one whose client left stays half-open and would hold close()
    // forever. End them when the peer does, and destroy what is left at shutdown.
    const upgraded = new Set<Duplex>();
    app.server.on('upgrade', (_req, socket: Duplex) => {
      upgraded.add(socket);
      socket.once('end', () => socket.destroy());
      socket.once('close', () => upgraded.delete(socket));
    });

    let stopping: Promise<void> | null = null;
    return {
      ctx,
      app,
      mesh,
      async listen(host, port) {
        await app.listen({ host, port });
        const addr = app.server.address();
        const actualPort = typeof addr === 'object' && addr ? addr.port : port;
        const h = host.includes(':') ? `[${host}]` : host;
        return `${opts.tls ? 'https' : 'http'}://${h}:${actualPort}`;
      },
      stop() {
        stopping ??= (async () => {
          shutdown.abort();
          credentials.stop();
          nodes.closeAll();
          await stopFeed();
          for (const sock of upgraded) sock.destroy();
          await app.close();
          await stopSequencer();
          await store.close();
        })();
        return stopping;
      },
    };
  } catch (e) {
    await stopFeed();
    await listener?.stop();
    await stopSequencer();
    await store.close();
    throw e;
  }
}
