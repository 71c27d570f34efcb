import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { waitFor } from '../../../test/support/poll.js';
import { startTestTower, type TestTower } from '../../../test/support/tower.js';

describe('event sequencing on postgres', () => {
  let t: TestTower;
  beforeAll(async () => {
    t = await startTestTower('postgres', { rateLimit: { limit: 0, windowMs: 60_000 } });
  });
  afterAll(async () => {
    await t.close();
  });

  it('numbers events of concurrent transactions 1..n without gaps, each once', async () => {
    const d = await t.call('POST', '/domains', { name: 'seq' });
    const writes = Array.from({ length: 40 }, (_, i) =>
      t.call('POST', `/domains/${d.body.id}/m`, { name: `m${i}` }),
    );
    await Promise.all(writes);
    const rows = await waitFor('all events numbered', async () => {
      const r = await t.tower.ctx.store.db.selectFrom('events').select(['pk', 'id']).orderBy('pk').execute();
      return r.every((x) => x.id !== null) ? r : null;
    });
    // Transactions may commit out of insertion order; ids follow visibility, not insertion.
    const ids = rows.map((r) => Number(r.id)).sort((a, b) => a - b);
    expect(ids).toEqual(Array.from({ length: rows.length }, (_, i) => i + 1));
  });

  it('signals local readers after numbering', async () => {
    let fired = 0;
    const off = t.tower.ctx.eventsCommitted.on(() => {
      fired++;
    });
    try {
      await t.call('POST', '/domains', { name: 'signal' });
      await waitFor('sequenced signal', () => fired > 0);
      const last = await t.tower.ctx.store.db
        .selectFrom('events')
        .select('id')
        .where('id', 'is not', null)
        .orderBy('id', 'desc')
        .limit(1)
        .executeTakeFirstOrThrow();
      expect(last.id).not.toBeNull();
    } finally {
      off();
    }
  });
});
