// The secrets broker as a svcd component: serves secrets.sock (0600, in the 0700 svcd
// directory) for agent subprocesses. Sessions are minted through ctx.secrets by whoever
// starts agents; values are fetched from the tower per request and live only in memory.
import type { Clock } from '../../lib/clock.js';
import { parseDuration } from '../../lib/duration.js';
import type { Logger } from '../../lib/log.js';
import { SvcError } from '../../protocol/errors.js';
import { type BrokerReply, MAX_BROKER_REQUEST_BYTES } from '../../protocol/secrets.js';
import type { Component } from '../component.js';
import type { SecretsMetrics } from '../metrics.js';
import type { DaemonPaths } from '../paths.js';
import { listenUnix, type UnixListener } from '../sockets.js';
import type { TowerApi } from '../tower-client/api.js';
import { answer, type BrokerDeps } from './broker.js';
import { SecretCache } from './cache.js';
import { serveConnection } from './connection.js';
import type { SecretSessions } from './sessions.js';

export { SessionRegistry } from './sessions.js';

export interface SecretsBrokerOptions {
  /** Memory cache TTL in ms; 0 (the default) turns the cache off. */
  cacheTtlMs?: number;
  maxRequestBytes?: number;
  requestTimeoutMs?: number;
  fetchTimeoutMs?: number;
  lingerMs?: number;
  maxConnections?: number;
}

export const BROKER_DEFAULTS = {
  maxRequestBytes: MAX_BROKER_REQUEST_BYTES,
  requestTimeoutMs: 5_000,
  fetchTimeoutMs: 10_000,
  lingerMs: 5_000,
  maxConnections: 1024,
};

/**
 * Reads the broker's settings from the daemon environment: SVC_SECRETS_CACHE_TTL
 * ("30s", "2m"; unset or "0" = off).
 */
export function brokerOptionsFromEnv(env: NodeJS.ProcessEnv): SecretsBrokerOptions {
  const ttl = env.SVC_SECRETS_CACHE_TTL?.trim();
  if (!ttl || ttl === '0' || ttl === 'off') return {};
  try {
    return { cacheTtlMs: parseDuration(ttl) };
  } catch (e) {
    throw new SvcError('config_invalid', `SVC_SECRETS_CACHE_TTL: ${(e as Error).message}`);
  }
}

/** What the broker uses of svcd (daemon.ts passes its DaemonContext). */
export interface SecretsBrokerContext {
  clock: Clock;
  log: Logger;
  paths: Pick<DaemonPaths, 'secretsSock'>;
  /** SVC_SECRETS_CACHE_TTL, when no options are given. */
  env: NodeJS.ProcessEnv;
  tower: TowerApi;
  /** The sessions agents present on secrets.sock. */
  secrets: SecretSessions;
}

export interface SecretsBroker extends Component {
  readonly socketPath: string;
}

export function createSecretsBroker(
  ctx: SecretsBrokerContext,
  options?: SecretsBrokerOptions,
  /** Replies are counted here by outcome (svcd's metrics). */
  metrics?: SecretsMetrics,
): SecretsBroker {
  const opts = { ...BROKER_DEFAULTS, ...(options ?? brokerOptionsFromEnv(ctx.env)) };
  const log = ctx.log.child({ component: 'secrets' });
  const cache = opts.cacheTtlMs ? new SecretCache(ctx.clock, opts.cacheTtlMs) : null;
  const deps: BrokerDeps = {
    sessions: ctx.secrets,
    tower: ctx.tower,
    cache,
    log,
    fetchTimeoutMs: opts.fetchTimeoutMs,
    setTimeout: (fn, ms) => ctx.clock.setTimeout(fn, ms),
  };
  const counts: Record<string, number> = {};
  const count = (r: BrokerReply) => {
    const k = r.ok ? 'ok' : r.error.code;
    counts[k] = (counts[k] ?? 0) + 1;
    metrics?.requests.inc({ outcome: k });
    // Invalid input: logged (the message never holds the caller's values), and the
    // connection ends with the reply (connection.ts).
    if (!r.ok && r.error.code === 'bad_request')
      log.warn({ why: r.error.message }, 'secrets.sock request refused');
  };
  let listener: UnixListener | null = null;
  let stopping: Promise<void> | null = null;

  return {
    name: 'secrets',
    socketPath: ctx.paths.secretsSock,
    async start() {
      if (listener) return;
      listener = await listenUnix(
        ctx.paths.secretsSock,
        (socket) =>
          serveConnection(socket, {
            maxRequestBytes: opts.maxRequestBytes,
            requestTimeoutMs: opts.requestTimeoutMs,
            lingerMs: opts.lingerMs,
            setTimeout: (fn, ms) => ctx.clock.setTimeout(fn, ms),
            answer: (decoded) => answer(deps, decoded),
            onReply: count,
          }),
        { allowHalfOpen: true, maxConnections: opts.maxConnections },
      );
      log.info(
        { socket: ctx.paths.secretsSock, cache_ttl_ms: opts.cacheTtlMs ?? 0 },
        'secrets broker listening',
      );
    },
    stop() {
      stopping ??= (async () => {
        await listener?.close();
        cache?.clear();
      })();
      return stopping;
    },
    status() {
      return {
        socket: ctx.paths.secretsSock,
        cache_ttl_ms: opts.cacheTtlMs ?? 0,
        cached: cache?.size ?? 0,
        replies: { ...counts },
      };
    },
  };
}
