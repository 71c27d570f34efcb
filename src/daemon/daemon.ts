// svcd's composition root: builds the DaemonContext and every component, hands each the
// others it calls, registers every component's mgmt.sock methods, starts the components in
// order and stops them in reverse. start() and stop() are idempotent; stop() is what
// SIGTERM/SIGINT call.

import type { Clock } from '../lib/clock.js';
import { systemClock } from '../lib/clock.js';
import type { Logger } from '../lib/log.js';
import { ensurePrivateDir } from '../lib/private-files.js';
import type { NodeIdentity } from '../protocol/nodes.js';
import { createAttachGateway } from './attach/gateway.js';
import { attachMethods } from './attach/methods.js';
import type { Component } from './component.js';
import type { DaemonContext } from './context.js';
import { createCron } from './cron/cron.js';
import { cronMethods } from './cron/methods.js';
import { createFanout } from './fanout/fanout.js';
import { fanoutMethods } from './fanout/methods.js';
import { createMcpBridge } from './mcp/bridge.js';
import { mcpMethods } from './mcp/methods.js';
import { createDaemonMetrics, metricsSnapshot } from './metrics.js';
import { method, registerMethods } from './mgmt/method.js';
import { MgmtServer } from './mgmt/server.js';
import { daemonPaths } from './paths.js';
import { createSecretsBroker, SessionRegistry } from './secrets/index.js';
import { openStateStore } from './state/store.js';
import { agentMethods } from './supervisor/methods.js';
import { createSupervisor } from './supervisor/supervisor.js';
import { loadSvcdConfig } from './svcd-config.js';
import { createTowerApi } from './tower-client/api.js';
import { createControlChannel } from './tower-client/control.js';
import { serveNodeRequests } from './tower-client/node-requests.js';
import { createOutbox } from './tower-client/outbox.js';
import { workerMethods } from './worker/methods.js';
import { createWorker } from './worker/worker.js';

export interface DaemonOptions {
  home: string;
  backendUrl: string;
  identity: NodeIdentity;
  /** The file the identity was read from (shown by daemon.status, used by svc system doctor). */
  identityFile?: string;
  env: NodeJS.ProcessEnv;
  log: Logger;
  version: string;
  clock?: Clock;
  /** Path of a Wasm validation module (--booster-wasm), run before every MCP tool call. */
  boosterWasm?: string;
}

export interface Daemon {
  ctx: DaemonContext;
  start(): Promise<void>;
  stop(): Promise<void>;
}

export async function createDaemon(opts: DaemonOptions): Promise<Daemon> {
  const clock = opts.clock ?? systemClock;
  const paths = daemonPaths(opts.home);
  // config.toml is read here, once, and each component gets its sections; an invalid file
  // stops svcd before anything is opened (config_invalid naming file, line and field).
  const config = await loadSvcdConfig(paths.configToml);
  // 0700 even where they existed with another mode (sockets, state.db and logs live here).
  for (const dir of [paths.svcdDir, paths.logsDir, paths.workDir]) ensurePrivateDir(dir);
  const log = opts.log;
  const state = openStateStore(paths.stateDb, clock);
  const mgmt = new MgmtServer(log.child({ component: 'mgmt' }));
  const tower = createTowerApi(opts.backendUrl, opts.identity.jwt);
  const outbox = createOutbox({ state, tower, clock, log });
  const control = createControlChannel({
    backendUrl: opts.backendUrl,
    jwt: opts.identity.jwt,
    version: opts.version,
    clock,
    log,
  });
  const shutdown = new AbortController();
  // Each component gets its part; served by daemon.metrics and the fan-out's GET /metrics.
  const metrics = createDaemonMetrics();
  const ctx: DaemonContext = {
    clock,
    log,
    paths,
    identity: opts.identity,
    env: opts.env,
    state,
    tower,
    control,
    events: outbox,
    secrets: new SessionRegistry(paths.secretsSock),
    shutdown: shutdown.signal,
  };
  // Start order (stopped in reverse). The broker first: agents get their secrets sessions
  // from ctx.secrets.
  const secrets = createSecretsBroker(ctx, undefined, metrics.secrets);
  const supervisor = createSupervisor(ctx, {
    config,
    metrics: metrics.supervisor,
    // agent.reload re-reads config.toml; an invalid file leaves this one in force.
    reloadConfig: () => loadSvcdConfig(paths.configToml),
  });
  // dispatch = "signal" jobs go to this daemon's supervisor.
  const cron = createCron(ctx, {
    signal: (target, prompt) => supervisor.signal(target, prompt),
    metrics: metrics.cron,
  });
  // Task subagents run through the supervisor's runtime runner (same templates and secrets).
  const worker = createWorker(ctx, () => supervisor.runtimes, {
    config: config.worker,
    policy: config.agent_policy,
    stopGraceMs: config.supervisor.stopGraceMs,
    metrics: metrics.worker,
  });
  // svcd.sock and tower attach streams, over the supervisor's PTY agents.
  const attach = createAttachGateway(ctx, supervisor);
  // Local /events relay of the tower feed (+ MQTT); independent of the rest.
  const fanout = createFanout(ctx, {
    config: config.fanout,
    metrics: metrics.fanout,
    metricsText: () => metrics.registry.metrics(),
  });
  // mcp.call / mcp.tools: schema pack + Wasm booster before the tower's /mcp/call.
  const mcp = createMcpBridge(ctx, { boosterWasm: opts.boosterWasm });
  const components: Component[] = [outbox, control, secrets, supervisor, cron, worker, attach, fanout, mcp];
  // The tower's node.request (console actions) runs mgmt.sock methods in-process.
  serveNodeRequests(control, (m, p, signal) => mgmt.invoke(m, p, signal), log, shutdown.signal);
  const startedAt = clock.now();

  registerMethods(mgmt, [
    method('daemon.status', async () => ({
      version: opts.version,
      pid: process.pid,
      node_id: opts.identity.node_id,
      hostname: opts.identity.hostname,
      node_file: opts.identityFile ?? null,
      backend_url: opts.backendUrl,
      started_at: new Date(startedAt).toISOString(),
      uptime_seconds: Math.floor((clock.now() - startedAt) / 1000),
      tower: { url: opts.backendUrl, connected: control.connected },
      components: Object.fromEntries(components.map((c) => [c.name, c.status?.() ?? {}])),
    })),
    method('daemon.metrics', () => metricsSnapshot(metrics)),
    ...agentMethods(supervisor),
    ...cronMethods(cron, () => clock.now()),
    ...workerMethods(worker),
    ...attachMethods(attach),
    ...fanoutMethods(fanout),
    ...mcpMethods(mcp),
  ]);

  const started: Component[] = [];
  let starting: Promise<void> | null = null;
  let stopping: Promise<void> | null = null;

  async function stopAll() {
    shutdown.abort();
    await mgmt.close();
    for (const c of started.reverse()) {
      try {
        await c.stop();
      } catch (e) {
        log.error({ err: e, component: c.name }, 'component failed to stop');
      }
    }
    await state.close();
  }

  return {
    ctx,
    start() {
      starting ??= (async () => {
        try {
          // mgmt.sock first: it refuses to start when another svcd is live.
          await mgmt.listen(paths.mgmtSock);
          for (const c of components) {
            await c.start();
            started.push(c);
          }
        } catch (e) {
          await stopAll();
          throw e;
        }
        log.info({ node_id: opts.identity.node_id, backend: opts.backendUrl }, 'svcd started');
      })();
      return starting;
    },
    stop() {
      stopping ??= (async () => {
        await starting?.catch(() => {});
        await stopAll();
        log.info('svcd stopped');
      })();
      return stopping;
    },
  };
}
