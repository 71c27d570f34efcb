import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { waitFor } from '../../../test/support/poll.js';
import { sequencerPass, startTestTower, type TestTower } from '../../../test/support/tower.js';

describe('event watermark on postgres', () => {
  let t: TestTower;
  beforeAll(async () => {
    t = await startTestTower('postgres', { rateLimit: { limit: 0, windowMs: 60_000 } });
  });
  afterAll(async () => {
    await t.close();
  });

  /**
   * Runs `fn` in an open transaction on a connection of its own (the store's connection
   * settings select the test's schema), rolled back if `fn` did not end it.
   */
  async function inTransaction(fn: (c: pg.Client) => Promise<void>): Promise<void> {
    const c = new pg.Client(t.tower.store.pgConfig ?? {});
    await c.connect();
    try {
      await c.query('begin');
      await fn(c);
    } finally {
      await c.query('rollback').catch(() => {});
      await c.end();
    }
  }

  /**
   * An event inserted by hand in `c`'s transaction; its id. Stamped now: an old stamp would be
   * past the feed's retention, and the pruner's first pass (1 s after start) deletes it.
   */
  const insertEvent = async (c: pg.Client, domainId: string) =>
    Number(
      (
        await c.query<{ id: string }>(
          `insert into events (ts, type, domain_id, payload)
           values ($2, 'matrix', $1, '{}') returning id`,
          [domainId, new Date(t.tower.clock.now()).toISOString()],
        )
      ).rows[0]?.id,
    );

  const visibleIds = async () =>
    (await t.tower.store.db.selectFrom('feed_events').select('id').orderBy('id').execute()).map((r) =>
      Number(r.id),
    );

  it('gives events of concurrent transactions distinct increasing ids, all readable in the end', async () => {
    const d = await t.call('POST', '/domains', { name: 'seq' });
    const writes = Array.from({ length: 40 }, (_, i) =>
      t.call('POST', `/domains/${d.body.id}/m`, { name: `m${i}` }),
    );
    await Promise.all(writes);
    const all = (await t.tower.store.db.selectFrom('events').select('id').orderBy('id').execute()).map((r) =>
      Number(r.id),
    );
    expect(new Set(all).size).toBe(all.length);
    const visible = await waitFor('all events below the watermark', async () => {
      const v = await visibleIds();
      return v.length === all.length ? v : null;
    });
    expect(visible).toEqual(all);
  });

  it('keeps a later commit unreadable while a transaction holding a smaller id is open', async () => {
    const d = await t.call('POST', '/domains', { name: 'hold' });
    await inTransaction(async (c) => {
      const heldId = await insertEvent(c, d.body.id as string);
      // Committed after the held insert, so its id is larger.
      const m = await t.call('POST', `/domains/${d.body.id}/m`, { name: 'later' });
      expect(m.status).toBe(201);
      const later = Math.max(
        ...(await t.tower.store.db.selectFrom('events').select('id').execute()).map((r) => Number(r.id)),
      );
      expect(later).toBeGreaterThan(heldId);
      // A pass that starts after that commit (stop waits for the pass under way) cannot move
      // the watermark to the held id or past it while the holder is open.
      await sequencerPass(t);
      const w0 = await t.tower.store.db.selectFrom('event_watermark').select('w').executeTakeFirstOrThrow();
      expect(Number(w0.w)).toBeLessThan(heldId);
      expect((await visibleIds()).filter((id) => id >= heldId)).toEqual([]);
      await c.query('commit');
      const v = await waitFor('both readable', async () => {
        const ids = await visibleIds();
        return ids.includes(later) ? ids : null;
      });
      expect(v).toContain(heldId);
    });
  });

  it('skips the id of a rolled-back insert and moves on', async () => {
    const d = await t.call('POST', '/domains', { name: 'abort' });
    await inTransaction(async (c) => {
      await insertEvent(c, d.body.id as string);
      await c.query('rollback');
    });
    const m = await t.call('POST', `/domains/${d.body.id}/m`, { name: 'after-abort' });
    expect(m.status).toBe(201);
    await waitFor('the later event readable', async () => {
      const r = await t.tower.store.db
        .selectFrom('feed_events')
        .select('id')
        .where('mission_id', '=', m.body.id as string)
        .executeTakeFirst();
      return r ?? null;
    });
  });

  it('signals local readers after advancing the watermark', async () => {
    let fired = 0;
    const off = t.tower.eventsCommitted.on(() => {
      fired++;
    });
    try {
      await t.call('POST', '/domains', { name: 'signal' });
      await waitFor('watermark signal', () => fired > 0);
      const w = await t.tower.store.db.selectFrom('event_watermark').select('w').executeTakeFirstOrThrow();
      const max = await t.tower.store.db
        .selectFrom('events')
        .select((eb) => eb.fn.max('id').as('max'))
        .executeTakeFirstOrThrow();
      expect(Number(w.w)).toBe(Number(max.max));
    } finally {
      off();
    }
  });
});
