// Resume is exact: every later visible event once, in order, across the switch from replay to
// live while writes keep committing; and on PostgreSQL, while a transaction holding a smaller
// id is open, later commits stay unreadable, so no reader skips its event.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openStream } from '../../../test/support/feed-stream.js';
import { gate, waitFor } from '../../../test/support/poll.js';
import { STORES, sequencerPass, startTestTower, type TestTower } from '../../../test/support/tower.js';

describe.each(STORES)('feed resume on %s', (store) => {
  let t: TestTower;
  let base: string;

  beforeAll(async () => {
    t = await startTestTower(store, { rateLimit: { limit: 0, windowMs: 60_000 } });
    base = await t.tower.listen('127.0.0.1', 0);
  });
  afterAll(async () => {
    await t?.close();
  });

  async function idsOfDomain(domainId: string): Promise<string[]> {
    const rows = await t.tower.store.db
      .selectFrom('feed_events')
      .select('id')
      .where('domain_id', '=', domainId)
      .orderBy('id')
      .execute();
    return rows.map((r) => String(r.id));
  }

  it('gives each resuming stream every later event once and in order while writers commit', async () => {
    const d = (await t.call('POST', '/domains', { name: 'resume' })).body.id as string;
    const m = (await t.call('POST', `/domains/${d}/m`, { name: 'm' })).body.id as string;
    const all = openStream(`${base}/events/stream?last_event_id=0&domain_id=${d}`, t.adminToken);
    await waitFor('the first two events', () => all.got.length >= 2);

    const WRITERS = 6;
    const EACH = 30;
    const resumed: { after: string; stream: ReturnType<typeof openStream> }[] = [];
    const writers = Array.from({ length: WRITERS }, async (_, w) => {
      for (let i = 0; i < EACH; i++) {
        const res = await t.call('POST', `/domains/${d}/m/${m}/t`, { title: `w${w}-${i}` });
        expect(res.status).toBe(201);
        // Every few writes one writer opens a stream resuming from somewhere in what has
        // been delivered so far: sometimes the newest id (pure live), sometimes far back.
        if (w === 0 && i % 5 === 0) {
          const seen = all.got.filter((e) => e.id !== null);
          const pick = seen[(i * 7) % seen.length]?.id as string;
          resumed.push({
            after: pick,
            stream: openStream(`${base}/events/stream?domain_id=${d}`, t.adminToken, {
              'last-event-id': pick,
            }),
          });
        }
      }
    });
    await Promise.all(writers);

    const ids = await waitFor('every event numbered', async () => {
      const r = await idsOfDomain(d);
      return r.length === WRITERS * EACH + 2 ? r : null;
    });
    await waitFor('the first stream to have everything', () => all.got.length >= ids.length);
    expect(all.got.map((e) => e.id)).toEqual(ids);
    expect(resumed.length).toBe(EACH / 5);
    for (const { after, stream } of resumed) {
      const want = ids.filter((id) => BigInt(id) > BigInt(after));
      await waitFor(`the stream resumed after ${after}`, () => stream.got.length >= want.length);
      expect(stream.got.map((e) => e.id)).toEqual(want);
    }
    await Promise.all([all.close(), ...resumed.map((r) => r.stream.close())]);
  });

  async function headId(): Promise<string> {
    const r = await t.tower.store.db
      .selectFrom('feed_events')
      .select((eb) => eb.fn.max('id').as('max'))
      .executeTakeFirst();
    return String(r?.max ?? 0);
  }

  it.runIf(store === 'postgres')(
    'holds back events committed while a transaction with a smaller id is open, then gives all in id order',
    async () => {
      const d = (await t.call('POST', '/domains', { name: 'late-commit' })).body.id as string;
      await waitFor('the domain event readable', async () => (await idsOfDomain(d)).length === 1);
      const live = openStream(
        `${base}/events/stream?domain_id=${d}&last_event_id=${await headId()}`,
        t.adminToken,
      );
      await waitFor('the stream to open', () => live.status() === 200);
      // A write that inserts its event first (the smaller id) and commits last.
      const commit = gate();
      const inserted = gate();
      const late = t.tower.write(async (tx) => {
        await tx.db
          .insertInto('events')
          .values({
            ts: tx.now,
            type: 'matrix',
            domain_id: d,
            mission_id: null,
            agent_id: null,
            status: null,
            payload: JSON.stringify({ which: 'late' }),
          })
          .execute();
        inserted.open();
        await commit.opened;
      });
      await inserted.opened;
      await t.call('POST', `/domains/${d}/m`, { name: 'early' });
      // A pass that starts after the early commit (stop waits for it) leaves the watermark
      // below the open transaction's id: neither event is readable yet.
      await sequencerPass(t);
      expect(await idsOfDomain(d)).toHaveLength(1);
      expect(live.got).toEqual([]);
      commit.open();
      await late;
      await t.call('POST', `/domains/${d}/m`, { name: 'after' });
      await waitFor('all three events', () => live.got.length >= 3);
      expect(
        live.got.map((e) => (e.data.payload as { name?: string; which?: string }).name ?? 'late'),
      ).toEqual(['late', 'early', 'after']);
      const ids = live.got.map((e) => BigInt(e.id ?? '0'));
      expect(ids[0] !== undefined && ids[1] !== undefined && ids[2] !== undefined).toBe(true);
      expect((ids[0] as bigint) < (ids[1] as bigint) && (ids[1] as bigint) < (ids[2] as bigint)).toBe(true);
      // A reader resuming after the late event gets the two later ones.
      const resumed = openStream(
        `${base}/events/stream?domain_id=${d}&last_event_id=${live.got[0]?.id}`,
        t.adminToken,
      );
      await waitFor('the early and after events', () => resumed.got.length >= 2);
      expect(resumed.got.map((e) => e.id)).toEqual(live.got.slice(1).map((e) => e.id));
      await Promise.all([live.close(), resumed.close()]);
    },
  );
});
