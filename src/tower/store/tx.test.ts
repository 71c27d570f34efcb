import Database from 'better-sqlite3';
import { sql } from 'kysely';
import { afterEach, describe, expect, it } from 'vitest';
import { gate } from '../../../test/support/poll.js';
import { openTempStore, type TempStore } from '../../../test/support/store.js';
import { FakeClock, iso, systemClock } from '../../lib/clock.js';
import { silentLogger } from '../../lib/log.js';
import { appendEvents } from '../feed/event-log.js';
import { MIGRATIONS } from '../migrations.js';
import { StoreHealth } from './health.js';
import { migrate, type Store } from './open.js';
import { createWrite } from './tx.js';

describe('createWrite on SQLite (grouped commits)', () => {
  let tmp: TempStore | undefined;
  let store: Store;
  afterEach(async () => {
    await tmp?.close();
    tmp = undefined;
  });

  async function open() {
    tmp = await openTempStore('sqlite', 'svc-tx-');
    store = tmp.store;
    const clock = new FakeClock(Date.parse('2026-11-23T10:00:00Z'));
    await migrate(store, clock, MIGRATIONS);
    let commits = 0;
    const write = createWrite(store, clock, { append: appendEvents, committed: () => commits++ });
    return { write, commits: () => commits };
  }

  const domain = (id: string, now: string) => ({
    id,
    name: id,
    description: '',
    created_at: now,
    updated_at: now,
  });

  it('commits concurrent writes together; a failing write rolls back only itself', async () => {
    const { write, commits } = await open();
    const results = await Promise.allSettled(
      ['d1', 'd2', 'bad', 'd3'].map((id) =>
        write(async (tx) => {
          await tx.db.insertInto('domains').values(domain(id, tx.now)).execute();
          tx.emit({ type: 'matrix', domain_id: id, payload: { id } });
          if (id === 'bad') throw new Error('refused');
          return id;
        }),
      ),
    );
    expect(results.map((r) => r.status)).toEqual(['fulfilled', 'fulfilled', 'rejected', 'fulfilled']);
    const ids = (await store.db.selectFrom('domains').select('id').orderBy('id').execute()).map((r) => r.id);
    expect(ids).toEqual(['d1', 'd2', 'd3']);
    const events = await store.db.selectFrom('events').select(['id', 'domain_id']).orderBy('id').execute();
    expect(events.map((e) => e.domain_id)).toEqual(['d1', 'd2', 'd3']);
    // All four were queued before the group's transaction began: one commit for them all.
    expect(commits()).toBe(1);
  });

  it('rejects writes that come after the store closed, instead of leaving them waiting', async () => {
    const { write } = await open();
    await store.close();
    const late = await Promise.allSettled([1, 2].map((n) => write(async () => n)));
    expect(late.map((r) => r.status)).toEqual(['rejected', 'rejected']);
    expect(String((late[0] as PromiseRejectedResult).reason)).toMatch(/destroyed/);
  });

  it('a write that fails on a constraint leaves earlier and later writes intact', async () => {
    const { write } = await open();
    await write(async (tx) => tx.db.insertInto('domains').values(domain('d1', tx.now)).execute());
    const dup = write(async (tx) => tx.db.insertInto('domains').values(domain('d1', tx.now)).execute());
    const next = write(async (tx) => tx.db.insertInto('domains').values(domain('d2', tx.now)).execute());
    await expect(dup).rejects.toThrow(/UNIQUE/);
    await next;
    expect(await store.db.selectFrom('domains').select('id').orderBy('id').execute()).toEqual([
      { id: 'd1' },
      { id: 'd2' },
    ]);
  });

  it('the reader connection reads while a write group is open, and sees its changes once committed', async () => {
    const { write } = await open();
    const count = async () =>
      Number(
        (
          await store.reader
            .selectFrom('domains')
            .select((eb) => eb.fn.countAll().as('n'))
            .executeTakeFirst()
        )?.n,
      );
    const held = gate();
    const entered = gate();
    const w = write(async (tx) => {
      await tx.db.insertInto('domains').values(domain('d1', tx.now)).execute();
      entered.open();
      await held.opened; // the write group keeps the store's connection across event-loop turns
    });
    await entered.opened;
    expect(await count()).toBe(0);
    held.open();
    await w;
    expect(await count()).toBe(1);
    await expect(
      store.reader.insertInto('domains').values(domain('d2', new Date().toISOString())).execute(),
    ).rejects.toThrow(/readonly/);
  });
});

describe.each(['sqlite', 'postgres'] as const)('write.insertOne on %s', (dialect) => {
  let tmp: TempStore | undefined;
  afterEach(async () => {
    await tmp?.close();
    tmp = undefined;
  });

  it('inserts the row and its event together, or nothing when the parent is missing', async () => {
    tmp = await openTempStore(dialect, 'svc-tx-');
    const { store } = tmp;
    const clock = new FakeClock(Date.parse('2026-11-23T10:00:00Z'));
    await migrate(store, clock, MIGRATIONS);
    let kicks = 0;
    const write = createWrite(store, clock, { append: appendEvents, committed: () => kicks++ });
    const now = iso(clock.now());
    await write(async (tx) =>
      tx.db
        .insertInto('domains')
        .values({ id: 'd1', name: 'd1', description: '', created_at: now, updated_at: now })
        .execute(),
    );
    const mission = (id: string, domainId: string) => ({
      table: 'missions',
      gate: { column: 'domain_id', table: 'domains' },
      build: (nowMs: number) => ({
        row: {
          id,
          domain_id: domainId,
          name: id,
          description: '',
          created_at: iso(nowMs),
          updated_at: iso(nowMs),
        },
        event: { type: 'matrix' as const, domain_id: domainId, mission_id: id, payload: { id } },
      }),
    });
    expect(await write.insertOne(mission('m1', 'd1'))).toBe(true);
    expect(await write.insertOne(mission('m2', 'nope'))).toBe(false);
    expect(await store.db.selectFrom('missions').select('id').execute()).toEqual([{ id: 'm1' }]);
    const events = await store.db.selectFrom('events').select(['mission_id', 'ts', 'payload']).execute();
    expect(events).toEqual([{ mission_id: 'm1', ts: now, payload: '{"id":"m1"}' }]);
    expect(kicks).toBe(1);
  });
});

describe('createWrite on SQLite when the store fails', () => {
  let tmp: TempStore | undefined;
  let other: Database.Database | undefined;
  afterEach(async () => {
    if (other?.open) other.close();
    await tmp?.close();
    tmp = undefined;
  });

  async function open(busyTimeoutMs: number) {
    tmp = await openTempStore('sqlite', 'svc-tx-fault-');
    const store = tmp.store;
    await migrate(store, systemClock, MIGRATIONS);
    const health = new StoreHealth({ clock: systemClock, log: silentLogger(), describe: store.describe });
    const write = createWrite(
      store,
      systemClock,
      { append: appendEvents, committed: () => {} },
      { health, busyTimeoutMs },
    );
    const file = store.describe.replace(/^sqlite /, '');
    const insert = (id: string, content = '') =>
      write(async (tx) => {
        await tx.db
          .insertInto('domains')
          .values({ id, name: id, description: content, created_at: tx.now, updated_at: tx.now })
          .execute();
        return id;
      });
    return { store, health, file, insert };
  }

  it("waits for another process's write lock without blocking the event loop, then writes", async () => {
    const { store, insert, file } = await open(60_000);
    other = new Database(file);
    other.exec('begin immediate');
    const pending = insert('waited');
    // Meanwhile the process serves reads.
    const rows = await store.reader.selectFrom('domains').select('id').execute();
    expect(rows).toEqual([]);
    other.exec('commit');
    await expect(pending).resolves.toBe('waited');
  });

  it('fails with SQLITE_BUSY past the busy timeout, marks the store unwritable, and recovers', async () => {
    const { insert, file, health } = await open(50);
    other = new Database(file);
    other.exec('begin immediate');
    await expect(insert('locked')).rejects.toMatchObject({ code: 'SQLITE_BUSY' });
    expect(health.writeFault()).toMatchObject({ kind: 'busy', cause: 'SQLITE_BUSY' });
    other.exec('rollback');
    await expect(insert('free')).resolves.toBe('free');
    expect(health.writeFault()).toBeNull();
  });

  it("rejects the writes of a group with the full disk's own error, not a failed rollback's, and writes once there is room", async () => {
    const { store, insert, health } = await open(1000);
    const pages = Number(
      (await sql<{ page_count: number }>`pragma page_count`.execute(store.db)).rows[0]?.page_count,
    );
    // The file may not grow any more: a write that needs new pages fails with SQLITE_FULL.
    await sql.raw(`pragma max_page_count = ${pages}`).execute(store.db);
    const results = await Promise.allSettled([insert('small'), insert('big', 'x'.repeat(200_000))]);
    for (const r of results) {
      expect(r.status).toBe('rejected');
      expect((r as PromiseRejectedResult).reason).toMatchObject({ code: 'SQLITE_FULL' });
    }
    expect(health.writeFault()).toMatchObject({ kind: 'full', cause: 'SQLITE_FULL' });
    expect(await store.db.selectFrom('domains').select('id').execute()).toEqual([]);
    await sql.raw(`pragma max_page_count = ${pages * 100}`).execute(store.db);
    await expect(insert('after')).resolves.toBe('after');
    expect(health.writeFault()).toBeNull();
  });
});
