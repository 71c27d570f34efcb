// PostgreSQL connections through a proxy that resets and stalls them: a connection that breaks
// while a request holds it never crashes the process, and one that stopped answering is
// dropped instead of being handed to the next request; the LISTEN connection comes back by
// itself and tells its subscribers to look again.
import { randomBytes } from 'node:crypto';
import { Kysely, PostgresDialect, sql } from 'kysely';
import pg from 'pg';
import { afterEach, describe, expect, it } from 'vitest';
import { type FaultProxy, startFaultProxy } from '../../../test/support/fault-proxy.js';
import { PG_BASE_URL } from '../../../test/support/pg.js';
import { waitFor } from '../../../test/support/poll.js';
import { Backoff } from '../../lib/backoff.js';
import { systemClock } from '../../lib/clock.js';
import { silentLogger } from '../../lib/log.js';
import { parsePostgresUrl } from './open.js';
import { createPool, kyselyPool, timedConfig } from './pg-connection.js';
import { createPgListener, type PgListener } from './pg-listen.js';

const cleanups: (() => Promise<unknown> | unknown)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

async function proxied(): Promise<{ proxy: FaultProxy; config: pg.ClientConfig }> {
  const base = new URL(PG_BASE_URL);
  const proxy = await startFaultProxy({ host: base.hostname, port: Number(base.port || 5432) });
  cleanups.push(() => proxy.close());
  base.host = `127.0.0.1:${proxy.port}`;
  const config = timedConfig(parsePostgresUrl(base.toString()).config, {
    connectTimeoutMs: 1000,
    statementTimeoutMs: 300,
  });
  return { proxy, config };
}

describe('PostgreSQL connections under faults', () => {
  it('fails a request whose connection breaks mid-transaction without crashing, and serves the next', async () => {
    const { proxy, config } = await proxied();
    const errors: Error[] = [];
    const pool = createPool({ ...config, max: 1 }, (e) => errors.push(e));
    const db = new Kysely<unknown>({ dialect: new PostgresDialect({ pool: kyselyPool(pool) }) });
    cleanups.push(() => db.destroy());
    const tx = db.transaction().execute(async (trx) => {
      await sql`select 1`.execute(trx);
      proxy.reset();
      await sql`select 2`.execute(trx);
    });
    await expect(tx).rejects.toThrow();
    // pg emitted 'error' on the checked-out client: handled (an unhandled one ends the process).
    await waitFor('the broken connection reported', () => errors.length > 0);
    const r = await sql<{ n: number }>`select 3 as n`.execute(db);
    expect(r.rows).toEqual([{ n: 3 }]);
  });

  it('drops a connection that stopped answering, so the next request does not wait behind it', async () => {
    const { proxy, config } = await proxied();
    const pool = createPool({ ...config, max: 1 }, () => {});
    const db = new Kysely<unknown>({ dialect: new PostgresDialect({ pool: kyselyPool(pool) }) });
    cleanups.push(() => db.destroy());
    await sql`select 1`.execute(db);
    proxy.stall();
    await expect(sql`select 1`.execute(db)).rejects.toThrow(/Query read timeout/);
    proxy.resume();
    // With one connection in the pool, this would queue behind the unanswered query.
    const r = await sql<{ n: number }>`select 4 as n`.execute(db);
    expect(r.rows).toEqual([{ n: 4 }]);
  });

  it('listens on every channel on one connection, and comes back after a reset and a stall', async () => {
    const { proxy, config } = await proxied();
    const suffix = randomBytes(4).toString('hex');
    const [a, b] = [`svc_test_a_${suffix}`, `svc_test_b_${suffix}`];
    const listener: PgListener = createPgListener({
      config,
      clock: systemClock,
      log: silentLogger(),
      pingMs: 100,
      backoff: new Backoff({ initialMs: 10, maxMs: 50 }),
    });
    cleanups.push(() => listener.stop());
    const got: string[] = [];
    let lookAgain = 0;
    listener.subscribe(a, (p) => got.push(`a:${p}`));
    listener.subscribe(b, (p) => got.push(`b:${p}`));
    listener.onListening(() => lookAgain++);
    await listener.start();
    expect(lookAgain).toBe(1);
    expect(proxy.open).toBe(1);
    const notifier = new pg.Client({ connectionString: PG_BASE_URL });
    await notifier.connect();
    cleanups.push(() => notifier.end());
    const notify = (ch: string, p: string) => notifier.query('select pg_notify($1, $2)', [ch, p]);

    await notify(a, '1');
    await notify(b, '2');
    await waitFor('both notifications', () => got.length === 2);
    proxy.reset();
    await waitFor('the listener back after a reset', () => lookAgain === 2 && listener.listening);
    await notify(b, '3');
    await waitFor('a notification after the reset', () => got.includes('b:3'));
    proxy.stall();
    await waitFor('the stalled connection noticed by its ping', () => !listener.listening);
    proxy.resume();
    await waitFor('the listener back after a stall', () => lookAgain === 3 && listener.listening);
    await notify(a, '4');
    await waitFor('a notification after the stall', () => got.includes('a:4'));
    expect(got).toEqual(['a:1', 'b:2', 'b:3', 'a:4']);
  });
});
