// Upgrading a PostgreSQL store to event ids given at insert (migration 11) keeps every event
// and its id; events the old sequencer had not numbered yet get the next ids, and new ones
// come after all of them. Event blocks (migration 12) keep every event and id too.
import { sql } from 'kysely';
import { afterEach, describe, expect, it } from 'vitest';
import { openTempStore, type TempStore } from '../../../test/support/store.js';
import { FakeClock } from '../../lib/clock.js';
import { MIGRATIONS } from '../migrations.js';
import { EVENT_BLOCK_MAX } from '../store/event-blocks.js';
import { migrate } from '../store/open.js';

describe('event id migration on postgres', () => {
  let tmp: TempStore | undefined;
  afterEach(async () => {
    await tmp?.close();
    tmp = undefined;
  });

  it('keeps existing events and ids, numbers the unnumbered ones next, and continues after them', async () => {
    tmp = await openTempStore('postgres', 'svc-evmig-');
    const { store } = tmp;
    const clock = new FakeClock(Date.parse('2026-11-23T10:00:00Z'));
    await migrate(
      store,
      clock,
      MIGRATIONS.filter((m) => m.version < 11),
    );
    const db = store.db;
    const ev = (n: number) =>
      sql`insert into events (ts, type, payload) values ('2026-11-23T10:00:00.000Z', 'matrix', ${JSON.stringify({ n })})`;
    // Five events, the first three numbered (with a hole left by retention), two not yet.
    for (let n = 1; n <= 5; n++) await ev(n).execute(db);
    await sql`update events set id = pk + 10 where pk <= 3`.execute(db);
    await sql`delete from events where id = 12`.execute(db);

    expect(await migrate(store, clock, MIGRATIONS)).toContain(11);

    const rows = await db.selectFrom('events').select(['id', 'payload']).orderBy('id').execute();
    expect(rows.map((r) => [Number(r.id), (JSON.parse(r.payload) as { n: number }).n])).toEqual([
      [11, 1],
      [13, 3],
      [14, 4],
      [15, 5],
    ]);
    const visible = await db.selectFrom('feed_events').select('id').orderBy('id').execute();
    expect(visible.map((r) => Number(r.id))).toEqual([11, 13, 14, 15]);
    await ev(6).execute(db);
    const next = await db
      .selectFrom('events')
      .select('id')
      .where('payload', '=', '{"n":6}')
      .executeTakeFirstOrThrow();
    expect(Number(next.id)).toBe(16);
    // Not readable until the watermark passes it (no sequencer runs here).
    expect(await db.selectFrom('feed_events').select('id').where('id', '=', next.id).execute()).toEqual([]);
  });
});

describe.each(['sqlite', 'postgres'] as const)('event block migration on %s', (dialect) => {
  let tmp: TempStore | undefined;
  afterEach(async () => {
    await tmp?.close();
    tmp = undefined;
  });

  it('keeps every event and id; feed_events carries the block size; ids then step past blocks', async () => {
    tmp = await openTempStore(dialect, 'svc-evblk-');
    const { store } = tmp;
    const clock = new FakeClock(Date.parse('2026-11-23T10:00:00Z'));
    await migrate(
      store,
      clock,
      MIGRATIONS.filter((m) => m.version !== 12),
    );
    const db = store.db;
    const ev = (n: number) =>
      sql`insert into events (ts, type, payload) values ('2026-11-23T10:00:00.000Z', 'matrix', ${JSON.stringify({ n })})`;
    for (let n = 1; n <= 3; n++) await ev(n).execute(db);
    const before = await db.selectFrom('events').select(['id', 'payload']).orderBy('id').execute();

    expect(await migrate(store, clock, MIGRATIONS)).toEqual([12]);

    const after = await db.selectFrom('events').select(['id', 'payload', 'n']).orderBy('id').execute();
    expect(after.map((r) => [String(r.id), r.payload, r.n])).toEqual(
      before.map((r) => [String(r.id), r.payload, null]),
    );
    if (dialect === 'postgres') await sql`update event_watermark set w = 1000000`.execute(db);
    const visible = await db.selectFrom('feed_events').select(['id', 'n']).orderBy('id').execute();
    expect(visible.map((r) => [String(r.id), r.n])).toEqual(before.map((r) => [String(r.id), null]));
    await ev(4).execute(db);
    await ev(5).execute(db);
    const next = (await db.selectFrom('events').select('id').orderBy('id').execute()).map((r) =>
      Number(r.id),
    );
    const last = Number(before[2]?.id);
    // SQLite writes no blocks: its rowid goes on one by one.
    const step = dialect === 'postgres' ? EVENT_BLOCK_MAX : 1;
    expect(next.slice(3)).toEqual([last + step, last + 2 * step]);
  });
});

describe('event payload compression on postgres', () => {
  it('compresses payloads with lz4 and keeps rows inline up to 8 KiB', async () => {
    const tmp = await openTempStore('postgres', 'svc-evlz4-');
    try {
      const { store } = tmp;
      await migrate(store, new FakeClock(0), MIGRATIONS);
      const r = await sql<{ compression: string; options: string[] | null }>`
        select a.attcompression as compression, c.reloptions as options
        from pg_attribute a join pg_class c on c.oid = a.attrelid
        where c.oid = 'events'::regclass and a.attname = 'payload'`.execute(store.db);
      expect(r.rows[0]).toEqual({ compression: 'l', options: ['toast_tuple_target=8160'] });
    } finally {
      await tmp.close();
    }
  });
});

describe.each(['sqlite', 'postgres'] as const)('pruned-through migration on %s', (dialect) => {
  it('starts an existing log at the id before its oldest event, an empty one at 0', async () => {
    const clock = new FakeClock(Date.parse('2026-11-23T10:00:00Z'));
    for (const events of [3, 0]) {
      const tmp = await openTempStore(dialect, 'svc-evpruned-');
      try {
        const { store } = tmp;
        const db = store.db;
        await migrate(
          store,
          clock,
          MIGRATIONS.filter((m) => m.version !== 14),
        );
        for (let n = 1; n <= events; n++)
          await sql`insert into events (ts, type, payload) values ('2026-11-23T10:00:00.000Z', 'matrix', '{}')`.execute(
            db,
          );
        // As the pruner before this migration left a log: the oldest event gone.
        const ids = (await db.selectFrom('events').select('id').orderBy('id').execute()).map((r) =>
          Number(r.id),
        );
        if (events > 0)
          await db
            .deleteFrom('events')
            .where('id', '=', ids[0] as number)
            .execute();
        expect(await migrate(store, clock, MIGRATIONS)).toEqual([14]);
        const row = await db.selectFrom('event_pruned').select('through').execute();
        expect(row.map((r) => Number(r.through))).toEqual([events > 0 ? (ids[1] as number) - 1 : 0]);
      } finally {
        await tmp.close();
      }
    }
  });
});
