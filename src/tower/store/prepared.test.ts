import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { createTestSchema, type TestSchema } from '../../../test/support/pg.js';
import { FakeClock } from '../../lib/clock.js';
import { MIGRATIONS } from '../migrations.js';
import { migrate, openStore, type Store } from './open.js';
import { prepare, slot } from './prepared.js';

describe.each(['sqlite', 'postgres'] as const)('prepared queries on %s', (kind) => {
  let store: Store;
  let dir: string;
  let schema: TestSchema | null = null;
  afterEach(async () => {
    await store?.close();
    await schema?.drop();
    schema = null;
    rmSync(dir, { recursive: true, force: true });
  });

  async function open(): Promise<Store> {
    dir = mkdtempSync(join(tmpdir(), 'svc-prep-'));
    if (kind === 'postgres') schema = await createTestSchema();
    store = await openStore({ dataDir: dir, database: schema?.url });
    await migrate(store, new FakeClock(Date.parse('2026-11-23T10:00:00Z')), MIGRATIONS);
    const now = '2026-11-23T10:00:00.000Z';
    await store.db
      .insertInto('domains')
      .values(
        ['a', 'b'].map((id) => ({ id, name: `n-${id}`, description: '', created_at: now, updated_at: now })),
      )
      .execute();
    return store;
  }

  it('fills its slots by name whatever their order in the SQL, on the store and in a transaction', async () => {
    const s = await open();
    const q = prepare<{ id: string }>(s, () =>
      s.db.selectFrom('domains').select('id').where('name', '=', slot('name')).where('id', '=', slot('id')),
    );
    expect(await q.all(s.db, { id: 'a', name: 'n-a' })).toEqual([{ id: 'a' }]);
    // Twice: on PostgreSQL the second call reuses the named statement.
    expect(await q.all(s.db, { id: 'b', name: 'n-a' })).toEqual([]);
    expect(await q.all(s.db, { id: 'b', name: 'n-b' })).toEqual([{ id: 'b' }]);
    const inTx = await s.db.transaction().execute((trx) => q.all(trx, { id: 'a', name: 'n-a' }));
    expect(inTx).toEqual([{ id: 'a' }]);
  });

  it('refuses a query with a literal value, and a call missing a slot', async () => {
    const s = await open();
    const literal = prepare(s, () => s.db.selectFrom('domains').select('id').where('id', '=', 'a'));
    await expect(literal.all(s.db, {})).rejects.toThrow(/not a slot/);
    const q = prepare(s, () => s.db.selectFrom('domains').select('id').where('id', '=', slot('id')));
    await expect(q.all(s.db, {})).rejects.toThrow(/needs a value for "id"/);
  });
});
