// PostgreSQL only: the replica's one LISTEN connection, serving every channel the tower
// listens on (feed wake-ups, task notices). Modelled on graphile-worker's listener: a broken
// connection is dropped and remade with backoff and jitter, notifications of an old connection
// are ignored, and after every (re)connection subscribers are told to look again, since what
// was notified meanwhile is lost. A connection that stops answering without breaking (a
// partition) is caught by a periodic ping. Subscribers never depend on notifications alone:
// each also polls.
import type pg from 'pg';
import { Backoff } from '../../lib/backoff.js';
import type { Clock, TimerHandle } from '../../lib/clock.js';
import type { Logger } from '../../lib/log.js';
import { connectClient, destroyClient } from './pg-connection.js';

export interface PgListener {
  /** Calls `onNotify` with the payload of every notification on `channel`. Before start(). */
  subscribe(channel: string, onNotify: (payload: string) => void): void;
  /** Calls `fn` each time LISTEN holds again on a new connection (look for what was missed). */
  onListening(fn: () => void): void;
  /** Whether a connection is listening now. */
  readonly listening: boolean;
  /** First connection attempt; on failure it keeps retrying in the background. */
  start(): Promise<void>;
  stop(): Promise<void>;
}

export interface PgListenerDeps {
  config: pg.ClientConfig;
  clock: Clock;
  log: Logger;
  /** How often the connection is checked with a query (ms). */
  pingMs?: number;
  backoff?: Backoff;
}

export const LISTEN_PING_MS = 5000;

export function createPgListener(deps: PgListenerDeps): PgListener {
  const { clock } = deps;
  const log = deps.log.child({ component: 'pg-listen' });
  const backoff = deps.backoff ?? new Backoff({ initialMs: 250, maxMs: 10_000 });
  const pingMs = deps.pingMs ?? LISTEN_PING_MS;
  const handlers = new Map<string, ((payload: string) => void)[]>();
  const listeners: (() => void)[] = [];
  let client: pg.Client | null = null;
  let connecting: Promise<void> | null = null;
  let retry: TimerHandle | null = null;
  let ping: TimerHandle | null = null;
  let stopped = false;
  let lostOnce = false;

  const safely = (what: string, fn: () => void) => {
    try {
      fn();
    } catch (e) {
      log.error({ err: e }, `${what} failed`);
    }
  };

  /** Drops `c` (if it is still the current one) and schedules a new connection. */
  function lost(c: pg.Client, err: unknown): void {
    if (client !== c) return;
    client = null;
    ping?.cancel();
    ping = null;
    destroyClient(c);
    if (stopped) return;
    lostOnce = true;
    const delay = backoff.next();
    log.warn({ err: (err as Error).message, retry_ms: delay }, 'LISTEN connection lost; reconnecting');
    scheduleConnect(delay);
  }

  function scheduleConnect(delay: number): void {
    if (stopped || retry) return;
    retry = clock.setTimeout(() => {
      retry = null;
      void connect();
    }, delay);
  }

  function schedulePing(c: pg.Client): void {
    ping = clock.setTimeout(() => {
      ping = null;
      c.query('select 1').then(
        () => {
          if (client === c && !stopped) schedulePing(c);
        },
        (e: unknown) => lost(c, e),
      );
    }, pingMs);
  }

  function connect(): Promise<void> {
    connecting ??= (async () => {
      if (stopped || client) return;
      let c: pg.Client | null = null;
      try {
        c = await connectClient(deps.config, (e) => {
          if (c) lost(c, e);
        });
        const made = c;
        made.on('notification', (n) => {
          if (client !== made) return;
          for (const h of handlers.get(n.channel) ?? [])
            safely('a notification handler', () => h(n.payload ?? ''));
        });
        const channels = [...handlers.keys()];
        if (channels.length > 0) {
          await made.query(channels.map((ch) => `listen "${ch.replace(/"/g, '""')}"`).join('; '));
        }
        if (stopped) {
          destroyClient(made);
          return;
        }
        client = made;
        backoff.reset();
        if (lostOnce) log.info({ channels }, 'LISTEN connection back');
        schedulePing(made);
        for (const fn of listeners) safely('a LISTEN subscriber', fn);
      } catch (e) {
        if (c) destroyClient(c);
        if (stopped) return;
        lostOnce = true;
        const delay = backoff.next();
        log.warn({ err: (e as Error).message, retry_ms: delay }, 'cannot LISTEN; retrying');
        scheduleConnect(delay);
      }
    })().finally(() => {
      connecting = null;
    });
    return connecting;
  }

  return {
    subscribe(channel, onNotify) {
      const list = handlers.get(channel) ?? [];
      list.push(onNotify);
      handlers.set(channel, list);
    },
    onListening(fn) {
      listeners.push(fn);
    },
    get listening() {
      return client !== null;
    },
    start: connect,
    async stop() {
      stopped = true;
      retry?.cancel();
      ping?.cancel();
      retry = null;
      ping = null;
      await connecting;
      const c = client;
      client = null;
      if (c) await c.end().catch(() => {});
    },
  };
}
