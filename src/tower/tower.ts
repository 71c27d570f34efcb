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
import { CONTROL_PATH } from '../protocol/control.js';
import { credentialRoutes } from './access/routes.js';
import { attachRoutes } from './attach/routes.js';
import { Authenticator } from './auth/authenticate.js';
import { CredentialWatch } from './auth/credential-watch.js';
import { createOidcVerifier, type OidcOptions } from './auth/oidc.js';
import { SigningKeys } from './auth/signing-keys.js';
import { bootstrapAdminToken } from './auth/tokens.js';
import { consoleRoutes } from './console/plugin.js';
import { approvalRoutes, approvalService } from './feed/approvals.js';
import { appendEvents } from './feed/event-log.js';
import { historyRoutes } from './feed/history.js';
import { FeedHub } from './feed/hub.js';
import { startPruner } from './feed/retention.js';
import { feedRoutes } from './feed/routes.js';
import { createSequencer } from './feed/sequencer.js';
import { FeedStats } from './feed/stats.js';
import { buildApp } from './http/app.js';
import { RequestDeadline } from './http/deadline.js';
import { createMetrics } from './http/metrics.js';
import { openapiRoute } from './http/openapi.js';
import { RateLimiter } from './http/rate-limit.js';
import { mcpRoutes } from './mcp/plugin.js';
import { meshTaskBlocks } from './mesh/event-codec.js';
import { meshRoutes } from './mesh/routes.js';
import { createMeshService, type MeshService } from './mesh/service.js';
import { MIGRATIONS } from './migrations.js';
import { admitConnects, CONNECTS_IN_FLIGHT } from './nodes/connect-admission.js';
import { ControlHub, controlRoutes } from './nodes/control-hub.js';
import { Presence } from './nodes/presence.js';
import { nodeRequestRoutes } from './nodes/routes.js';
import { createTaskRelay } from './nodes/task-relay.js';
import { recordCollections, recordRoutes } from './records/routes.js';
import { type AgentLookup, agentsTableLookup } from './secrets/agents.js';
import { secretRoutes } from './secrets/routes.js';
import { StoreHealth } from './store/health.js';
import { migrate, openStore, type Store } from './store/open.js';
import type { StoreTimeouts } from './store/pg-connection.js';
import { createPgListener, type PgListener } from './store/pg-listen.js';
import { createReadiness } from './store/readiness.js';
import { createWrite, type Write } from './store/tx.js';

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
  /** A schema pack for /mcp/call arguments instead of the embedded one (SVC_SCHEMA_PACK_FILE). */
  schemaPackFile?: string;
  /** PostgreSQL: the feed sequencer's pause between busy passes, ms (SVC_SEQ_GAP_MS). */
  sequencerGapMs?: number;
  /**
   * Listen queue of the HTTP socket (connections the kernel holds before the tower accepts
   * them); the kernel caps it at net.core.somaxconn. Default LISTEN_BACKLOG.
   */
  listenBacklog?: number;
  /** Node control channels this replica holds at most; past it connects get 503 (0: no limit). */
  maxNodeChannels?: number;
  /**
   * Node connects this replica handles at once; past it a connect gets 503 with Retry-After
   * before any lookup (nodes/connect-admission.ts). Default CONNECTS_IN_FLIGHT; 0: no limit.
   */
  maxConnectsInFlight?: number;
  /**
   * The base URL other replicas reach this one at (the hop for nodes, attach streams and
   * tickets held here: nodes/forward.ts). Default: the URL it listens on.
   */
  advertiseUrl?: string;
}

/**
 * Node's own default is 511: a fleet reconnecting at once overflows it and the kernel drops
 * connection requests, which the clients see as seconds of SYN retransmits (docs/configuration.md, Many nodes).
 */
export const LISTEN_BACKLOG = 4096;

export interface Tower {
  app: FastifyInstance;
  /** The tower's parts, for tests and in-process benchmarks (areas get only what they use). */
  store: Store;
  write: Write;
  clock: Clock;
  log: Logger;
  auth: Authenticator;
  /** Node control channels connected to this replica. */
  nodes: ControlHub;
  /** Which replica holds each node's channel, shared in the store. */
  presence: Presence;
  /**
   * Fires when events written on this replica became readable: at commit on SQLite, once
   * the sequencer moved the watermark of `feed_events` past them on PostgreSQL.
   */
  eventsCommitted: Signal<void>;
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
    const applied = await migrate(store, clock, MIGRATIONS);
    if (applied.length > 0) log.info({ applied, store: store.describe }, 'store migrated');
    const keys = new SigningKeys(store.db, store.dialect, clock);
    await keys.init();
    const eventsCommitted = new Signal<void>((e) => log.error({ err: e }, 'events listener failed'));
    // SQLite events are readable at commit; PostgreSQL ones once below the sequencer's watermark.
    const sequencer = createSequencer({
      store,
      clock,
      log,
      sequenced: eventsCommitted,
      ...(opts.sequencerGapMs !== undefined ? { busyGapMs: opts.sequencerGapMs } : {}),
    });
    const health = new StoreHealth({ clock, log: storeLog, describe: store.describe });
    const write = createWrite(
      store,
      clock,
      {
        append: appendEvents,
        committed: () => (store.dialect === 'postgres' ? sequencer.kick() : eventsCommitted.emit()),
      },
      { health, ...(opts.busyTimeoutMs !== undefined ? { busyTimeoutMs: opts.busyTimeoutMs } : {}) },
    );
    await sequencer.start();
    stopSequencer = () => sequencer.stop();
    const eventRetentionMs = opts.eventRetentionMs ?? 7 * 86_400_000;
    const auth = new Authenticator({
      db: store.db,
      dialect: store.dialect,
      clock,
      keys,
      oidc: opts.oidc ? createOidcVerifier(opts.oidc, clock) : null,
      cacheMs: opts.authCacheMs,
    });
    const shutdown = new AbortController();
    const nodes = new ControlHub(clock);
    // Which replica holds each node's channel, shared in the store (nodes/presence.ts).
    const presence = new Presence({ db: store.db, write, clock, log });
    nodes.onPresence((nodeId, online) => {
      void (online ? presence.held(nodeId) : presence.released(nodeId));
    });
    const nodesOnline = async (ids: string[]) => {
      const here = ids.filter((id) => nodes.isOnline(id));
      const there = await presence.online(ids.filter((id) => !nodes.isOnline(id)));
      return new Set([...here, ...there]);
    };
    const credentials = new CredentialWatch({ auth, clock, log });
    const rateLimiter = new RateLimiter(opts.rateLimit ?? DEFAULT_RATE_LIMIT);
    // Failed authentications per client address, refused (429) before any lookup once spent.
    const authFailures = new RateLimiter(opts.authFailureLimit ?? DEFAULT_AUTH_FAILURE_LIMIT);
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
    const stopPruning = startPruner({ store, clock, log, retentionMs: eventRetentionMs });
    // task_ready, task_cancelled and approval_decided to the nodes of every replica
    // (PostgreSQL NOTIFY between replicas).
    const taskRelay = createTaskRelay({ store, nodes, clock, log, listener });
    await taskRelay.start();
    // Every channel is subscribed: listen (retrying in the background if it cannot yet).
    await listener?.start();
    const metrics = createMetrics({
      store: { db: store.db, clock },
      nodesOnline: () => nodes.connectedNodes().length,
    });
    const mesh = createMeshService({
      dialect: store.dialect,
      db: store.db,
      write,
      clock,
      log,
      hooks: {
        ...metrics.mesh,
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
    const feedStats = new FeedStats();
    feedStats.register(metrics.registry);
    feedStats.countFanOut(() => hub.fanOut);
    const app = await buildApp(
      { clock, log, bodyLimitBytes: opts.bodyLimitBytes ?? 1024 * 1024, auth, rateLimiter, authFailures },
      {
        metrics,
        health,
        readiness: createReadiness({ store, health, write, clock }),
        deadline: new RequestDeadline(clock, opts.requestDeadlineMs),
        ...(opts.onRoute ? { onRoute: opts.onRoute } : {}),
        ...(opts.tls ? { https: opts.tls } : {}),
      },
    );
    // One plugin per area, each given only what it uses. The feed registers the WebSocket
    // support that the control channel and attach routes use too, so it comes first.
    const agents = opts.agentLookup ?? agentsTableLookup;
    const streams = { clock, log, credentials, shutdown: shutdown.signal };
    await app.register(feedRoutes, {
      ...streams,
      hub,
      stats: feedStats,
      wsCompression: opts.wsCompression ?? false,
      write,
      dialect: store.dialect,
      rateLimiter,
    });
    await app.register(historyRoutes, { store, blocks: [meshTaskBlocks] });
    await app.register(approvalRoutes, { store, write, agents, notices: taskRelay });
    await app.register(meshRoutes, { mesh, db: store.db, write });
    const records = recordCollections({ store, write });
    await app.register(mcpRoutes, {
      log,
      mesh,
      approvals: approvalService({ store, write, agents, notices: taskRelay }),
      records,
      ...(opts.schemaPackFile !== undefined ? { schemaPackFile: opts.schemaPackFile } : {}),
    });
    await app.register(controlRoutes, {
      hub: nodes,
      clock,
      log,
      write,
      credentials,
      ...(opts.maxNodeChannels ? { maxChannels: opts.maxNodeChannels } : {}),
    });
    // In front of the WebSocket plugin's upgrade listener, registered with the feed above.
    // With 0 (no limit) it still closes every refused upgrade once answered.
    const admission = admitConnects(app.server, {
      path: CONTROL_PATH,
      max: opts.maxConnectsInFlight ?? CONNECTS_IN_FLIGHT,
    });
    app.websocketServer.on('connection', (_ws, req) => admission.opened(req));
    await app.register(nodeRequestRoutes, { hub: nodes, store, agents, presence });
    await app.register(attachRoutes, {
      ...streams,
      ...(opts.attachOrigins ? { allowedOrigins: opts.attachOrigins } : {}),
      agents,
      store,
      auth,
      nodes,
      presence,
      authFailures,
    });
    await app.register(credentialRoutes, { store, write, auth, keys, presence: nodesOnline });
    await app.register(recordRoutes, { collections: records });
    await app.register(secretRoutes, {
      clock,
      log,
      store,
      write,
      dataDir: opts.dataDir,
      ...(opts.masterKey !== undefined ? { masterKey: opts.masterKey } : {}),
      agents,
    });
    await app.register(consoleRoutes, opts.consoleDir ? { dir: opts.consoleDir } : {});
    // Last: the OpenAPI document describes every route registered above.
    openapiRoute(app);
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
      app,
      store,
      write,
      clock,
      log,
      auth,
      nodes,
      presence,
      eventsCommitted,
      mesh,
      async listen(host, port) {
        await app.listen({ host, port, backlog: opts.listenBacklog ?? LISTEN_BACKLOG });
        const addr = app.server.address();
        const actualPort = typeof addr === 'object' && addr ? addr.port : port;
        const h = host.includes(':') ? `[${host}]` : host;
        const url = `${opts.tls ? 'https' : 'http'}://${h}:${actualPort}`;
        await presence.start(opts.advertiseUrl ?? url);
        return url;
      },
      stop() {
        stopping ??= (async () => {
          shutdown.abort();
          credentials.stop();
          nodes.closeAll();
          await presence.stop();
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
