// A fan-out pass writes its streams in slices with a turn of the event loop between them (so
// requests run while thousands of streams are written), and slicing changes nothing of what
// each stream gets: every event once, in id order, also for streams that open, resume or
// close in the middle of a pass.
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { waitFor } from '../../../test/support/poll.js';
import { startTestTower, type TestTower } from '../../../test/support/tower.js';
import { silentLogger } from '../../lib/log.js';
import type { FeedEvent } from '../../protocol/events.js';
import type { Principal } from '../auth/principal.js';
import { FeedHub, PAGE, type Subscription } from './hub.js';

const admin: Principal = {
  kind: 'token',
  id: 'admin',
  name: 'admin',
  scopes: ['feed:read'],
  domains: null,
  expiresAt: null,
};

const SLICE = 4;

describe('feed hub fan-out in slices', () => {
  let t: TestTower;
  let hub: FeedHub;

  beforeEach(async () => {
    t = await startTestTower('sqlite');
    hub = new FeedHub({
      store: t.tower.store,
      clock: t.tower.clock,
      log: silentLogger(),
      onLocalCommit: (listener) => t.tower.eventsCommitted.on(listener),
      blocks: [],
      slice: SLICE,
    });
    await hub.start();
  });
  afterEach(async () => {
    await hub?.stop();
    await t?.close();
  });

  /** Emits `n` progress events in one transaction; returns their ids in order. */
  async function emit(n: number): Promise<bigint[]> {
    await t.tower.write(async (tx) => {
      for (let i = 0; i < n; i++) {
        tx.emit({
          type: 'progress',
          domain_id: null,
          mission_id: null,
          agent_id: null,
          status: null,
          payload: { i },
        });
      }
    });
    const rows = await t.tower.store.reader
      .selectFrom('feed_events')
      .select('id')
      .where('type', '=', 'progress')
      .orderBy('id')
      .execute();
    return rows.map((r) => BigInt(r.id)).slice(-n);
  }

  it('lets the event loop turn between slices of one pass', async () => {
    const order: string[] = [];
    const subs: Subscription[] = [];
    // Three slices of streams; the first stream to get the event asks for a turn of the loop.
    for (let i = 0; i < SLICE * 3; i++) {
      subs.push(
        await hub.subscribe(admin, { types: ['progress'] }, null, {
          deliver: () => {
            if (order.length === 0) setImmediate(() => order.push('turn'));
            order.push(`stream ${i}`);
            return true;
          },
          reset: () => {},
          closed: () => {},
        }),
      );
    }
    await emit(1);
    await waitFor(
      'every stream to get the event',
      () => order.filter((x) => x !== 'turn').length === SLICE * 3,
    );
    // The turn came after the first slice and before the second: the pass did not hold the
    // loop for all the streams.
    expect(order.indexOf('turn')).toBe(SLICE);
    expect(order.filter((x) => x !== 'turn')).toEqual(
      Array.from({ length: SLICE * 3 }, (_, i) => `stream ${i}`),
    );
    for (const s of subs) s.close();
  });

  it('hands every stream every event once, in order, also those that open, resume or close mid-pass', async () => {
    const n = 3 * SLICE + 1;
    const got: bigint[][] = Array.from({ length: n }, () => []);
    const subs: Subscription[] = [];
    const lateLive: bigint[] = [];
    const resumed: bigint[] = [];
    let resumeAfter: bigint | null = null;
    let opened = false;
    const sinkOf = (into: bigint[], onFirst?: () => void) => ({
      deliver(events: readonly FeedEvent[]) {
        if (onFirst && into.length === 0) onFirst();
        for (const ev of events) into.push(BigInt(ev.id));
        return true;
      },
      reset: () => {},
      closed: () => {},
    });
    for (let i = 0; i < n; i++) {
      // The first stream opens two more while the pass is under way: a live one and one
      // resuming from just before the first event; the second closes the last stream.
      const onFirst =
        i === 0
          ? () => {
              if (opened || resumeAfter === null) return;
              opened = true;
              void hub.subscribe(admin, { types: ['progress'] }, null, sinkOf(lateLive));
              void hub.subscribe(admin, { types: ['progress'] }, resumeAfter, sinkOf(resumed));
            }
          : i === 1
            ? () => subs[n - 1]?.close()
            : undefined;
      subs.push(
        await hub.subscribe(admin, { types: ['progress'] }, null, sinkOf(got[i] as bigint[], onFirst)),
      );
    }
    // Several pages in one pass, then more events once the late streams are open.
    const newest = BigInt(
      (
        await t.tower.store.reader
          .selectFrom('feed_events')
          .select('id')
          .orderBy('id', 'desc')
          .limit(1)
          .execute()
      )[0]?.id ?? 0,
    );
    resumeAfter = newest;
    const first = await emit(2 * PAGE + 7);
    await waitFor('the open streams to get the first events', () =>
      got.slice(0, n - 1).every((g) => g.length === first.length),
    );
    await waitFor('the resumed stream to catch up', () => resumed.length >= first.length);
    const second = await emit(PAGE + 3);
    const all = [...first, ...second];
    await waitFor(
      'every open stream to get every event',
      () => got.slice(0, n - 1).every((g) => g.length === all.length) && resumed.length === all.length,
    );
    for (const g of got.slice(0, n - 1)) expect(g).toEqual(all);
    // Closed in the first pass: what it got is a prefix, nothing after its close.
    const closed = got[n - 1] as bigint[];
    expect(closed).toEqual(all.slice(0, closed.length));
    expect(closed.length).toBeLessThan(all.length);
    // Resumed from before the first event: all of them once, in order.
    expect(resumed).toEqual(all);
    // Opened live mid-pass: the events after some point, once, in order, to the newest.
    expect(lateLive).toEqual(all.slice(all.length - lateLive.length));
    expect(lateLive.length).toBeGreaterThanOrEqual(second.length);
    for (const s of subs) s.close();
  });
});
