// PostgreSQL connections that never crash or hang the tower: bounded connect, statement and
// read times, an 'error' listener on every client for its whole life (pg emits 'error' on a
// client whose socket breaks, and an unhandled one ends the process), and a connection that
// stopped answering is destroyed rather than handed to the next request.
import type { PostgresPool, PostgresPoolClient, PostgresQueryResult } from 'kysely';
import pg from 'pg';
import { storeFault } from './faults.js';

export interface StoreTimeouts {
  /** Opening a connection, and waiting for a free one in a pool (ms). */
  connectTimeoutMs: number;
  /**
   * PostgreSQL's statement_timeout (ms); the client also stops waiting for an answer a second
   * after it (a partition: the server's own timeout never reaches us). 0: no limit.
   */
  statementTimeoutMs: number;
}

export const DEFAULT_STORE_TIMEOUTS: StoreTimeouts = { connectTimeoutMs: 5000, statementTimeoutMs: 10_000 };

/**
 * How much longer than statement_timeout the client waits for an answer: the server's
 * cancellation needs a round trip to arrive, and it should be what a client sees when the
 * server is up.
 */
const READ_MARGIN_MS = 1000;

/** TCP keep-alive probes start after this much silence (the OS gives up some probes later). */
const KEEPALIVE_MS = 10_000;

/** `base` with the timeouts applied. */
export function timedConfig(base: pg.ClientConfig, t: StoreTimeouts): pg.ClientConfig {
  return {
    ...base,
    options: [base.options, `-c statement_timeout=${t.statementTimeoutMs}`].filter(Boolean).join(' '),
    connectionTimeoutMillis: t.connectTimeoutMs,
    ...(t.statementTimeoutMs > 0 ? { query_timeout: t.statementTimeoutMs + READ_MARGIN_MS } : {}),
    keepAlive: true,
    keepAliveInitialDelayMillis: KEEPALIVE_MS,
  };
}

/**
 * Ends `client` at once, whatever state its socket is in: `end()` alone waits for a
 * connection that may never answer again.
 */
export function destroyClient(client: pg.Client): void {
  client.end().catch(() => {});
  // pg keeps the socket on a private field; a client without one has nothing to destroy.
  (
    client as unknown as { connection?: { stream?: { destroy?: () => void } } }
  ).connection?.stream?.destroy?.();
}

/**
 * Whether `err` means this connection cannot be used any more: it broke, or an answer did not
 * come in time and would arrive for whatever is asked next. Errors the server sent
 * (statement_timeout included) leave the connection usable.
 */
export function connectionLost(err: unknown): boolean {
  if (err instanceof pg.DatabaseError) return false;
  const f = storeFault(err);
  return f !== null && (f.kind === 'unreachable' || f.kind === 'timeout');
}

/**
 * A pool whose clients always have an 'error' listener (pg-pool removes its own while a
 * client is checked out, which is when a broken socket most often shows).
 */
export function createPool(config: pg.PoolConfig, onError: (err: Error) => void): pg.Pool {
  const pool = new pg.Pool(config);
  pool.on('error', onError);
  pool.on('connect', (client) => {
    client.on('error', onError);
  });
  return pool;
}

/**
 * `pool` for Kysely: a connection whose query failed because the connection was lost is
 * destroyed and returned to the pool as failed (pg-pool then drops it), where Kysely would
 * return it as healthy and the next request would wait behind the unanswered query.
 */
export function kyselyPool(pool: pg.Pool): PostgresPool {
  return {
    async connect(): Promise<PostgresPoolClient> {
      const client = await pool.connect();
      let lost: Error | undefined;
      const query = async <R>(text: string, params: ReadonlyArray<unknown>) => {
        try {
          return (await client.query(text, params as unknown[])) as unknown as PostgresQueryResult<R>;
        } catch (e) {
          if (!lost && connectionLost(e)) {
            lost = e as Error;
            destroyClient(client);
          }
          throw e;
        }
      };
      return {
        query: query as PostgresPoolClient['query'],
        release: () => client.release(lost),
      };
    },
    end: () => pool.end(),
  };
}

/**
 * A dedicated client (LISTEN, the sequencer), connected, with `onError` for its whole life.
 * Rejects (and leaves nothing open) when it cannot connect in time.
 */
export async function connectClient(
  config: pg.ClientConfig,
  onError: (err: Error) => void,
): Promise<pg.Client> {
  const client = new pg.Client(config);
  client.on('error', onError);
  try {
    await client.connect();
  } catch (e) {
    destroyClient(client);
    throw e;
  }
  return client;
}
