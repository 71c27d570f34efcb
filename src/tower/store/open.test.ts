// openStore on PostgreSQL: every session the tower opens (its pool and the sequencer's and
// listeners' own clients, built from pgConfig) selects the schema and has PostgreSQL end it if
// left idle inside a transaction, which would otherwise hold the feed's watermark. The hot
// pool's sessions also plan prepared statements generically.
import { sql } from 'kysely';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestSchema, type TestSchema } from '../../../test/support/pg.js';
import { makeTempDir } from '../../../test/support/tmp.js';
import { IDLE_IN_TRANSACTION_TIMEOUT_MS, openStore, type Store } from './open.js';

describe('openStore (postgres)', () => {
  const tmp = makeTempDir('svc-open-');
  let ts: TestSchema;
  let store: Store;

  beforeAll(async () => {
    ts = await createTestSchema();
    store = await openStore({ database: ts.url, dataDir: tmp.dir });
  });
  afterAll(async () => {
    await store.close();
    await ts.drop();
    tmp.remove();
  });

  const expected = `${IDLE_IN_TRANSACTION_TIMEOUT_MS / 1000}s`;

  it('sets the schema and the idle-in-transaction timeout on pooled sessions', async () => {
    const r = await sql<{
      path: string;
      timeout: string;
    }>`select current_setting('search_path') as path, current_setting('idle_in_transaction_session_timeout') as timeout`.execute(
      store.db,
    );
    expect(r.rows[0]).toEqual({ path: ts.schema, timeout: expected });
  });

  it('sets them on clients built from pgConfig too', async () => {
    const c = new pg.Client(store.pgConfig ?? {});
    await c.connect();
    try {
      const r = await c.query(
        `select current_setting('search_path') as path, current_setting('idle_in_transaction_session_timeout') as timeout`,
      );
      expect(r.rows[0]).toEqual({ path: ts.schema, timeout: expected });
    } finally {
      await c.end();
    }
  });

  it('plans generically on the hot pool only, which has the same settings', async () => {
    const q = `select current_setting('search_path') as path,
      current_setting('idle_in_transaction_session_timeout') as timeout,
      current_setting('plan_cache_mode') as plans`;
    const hot = await store.pgHotPool?.query(q);
    expect(hot?.rows[0]).toEqual({ path: ts.schema, timeout: expected, plans: 'force_generic_plan' });
    const main = await store.pgPool?.query(q);
    expect(main?.rows[0]).toEqual({ path: ts.schema, timeout: expected, plans: 'auto' });
  });
});
