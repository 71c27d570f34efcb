// Live fan-out works out what each view (visible domains and filter) sees of a pass once:
// subscribers of one view are handed the very same array, others their own selection.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startFeedHub } from '../../../test/support/events.js';
import { waitFor } from '../../../test/support/poll.js';
import { startTestTower, type TestTower } from '../../../test/support/tower.js';
import { silentLogger } from '../../lib/log.js';
import type { FeedEvent } from '../../protocol/events.js';
import type { Principal } from '../auth/principal.js';
import type { Store } from '../store/open.js';
import { type FeedFilter, FeedHub, type SubscriberSink, viewKey } from './hub.js';

const principal = (id: string, domains: string[] | null): Principal => ({
  kind: 'token',
  id,
  name: id,
  scopes: ['feed:read'],
  domains,
  expiresAt: null,
});

function sink(): SubscriberSink & { got: (readonly FeedEvent[])[] } {
  const got: (readonly FeedEvent[])[] = [];
  return { got, deliver: (events) => got.push(events) > 0, reset: () => {}, closed: () => {} };
}

describe('feed hub fan-out by view', () => {
  let t: TestTower;
  let hub: FeedHub;

  beforeAll(async () => {
    t = await startTestTower('sqlite');
    hub = await startFeedHub(t.tower);
  });
  afterAll(async () => {
    await hub?.stop();
    await t?.close();
  });

  it('keys views by visible domains and filter, whatever their order', () => {
    const f: FeedFilter = { domainIds: ['b', 'a'], types: ['progress'] };
    expect(viewKey(principal('x', ['d2', 'd1']), f)).toBe(
      viewKey(principal('y', ['d1', 'd2']), { domainIds: ['a', 'b'], types: ['progress'] }),
    );
    expect(viewKey(principal('x', null), {})).toBe(viewKey(principal('x', null), { types: [] }));
    expect(viewKey(principal('x', null), {})).not.toBe(viewKey(principal('x', []), {}));
    expect(viewKey(principal('x', null), { domainIds: ['a'] })).not.toBe(
      viewKey(principal('x', null), { missionIds: ['a'] }),
    );
  });

  it('hands subscribers of one view the same events array and each other view its own', async () => {
    const all1 = sink();
    const all2 = sink();
    const onlyA = sink();
    const domainB = sink();
    const subs = await Promise.all([
      hub.subscribe(principal('admin', null), { types: ['progress'] }, null, all1),
      hub.subscribe(principal('admin2', null), { types: ['progress'] }, null, all2),
      hub.subscribe(principal('admin', null), { domainIds: ['dom_a'], types: ['progress'] }, null, onlyA),
      hub.subscribe(principal('tok_b', ['dom_b']), {}, null, domainB),
    ]);
    const before = hub.fanOut;
    await t.tower.write(async (tx) => {
      for (const domain_id of ['dom_a', 'dom_b', null, 'dom_a']) {
        tx.emit({ type: 'progress', domain_id, mission_id: null, agent_id: null, status: null, payload: {} });
      }
    });
    const flat = (s: { got: (readonly FeedEvent[])[] }) => s.got.flat().map((e) => e.domain_id);
    await waitFor(
      'every subscriber to get its events',
      () => flat(all2).length >= 4 && flat(domainB).length >= 1,
    );
    expect(flat(all1)).toEqual(['dom_a', 'dom_b', null, 'dom_a']);
    expect(all1.got.length).toBe(all2.got.length);
    all1.got.forEach((events, i) => {
      expect(all2.got[i]).toBe(events);
    });
    expect(flat(onlyA)).toEqual(['dom_a', 'dom_a']);
    expect(flat(domainB)).toEqual(['dom_b']);
    const ids = all1.got.flat().map((e) => BigInt(e.id));
    expect(ids).toEqual([...ids].sort((a, b) => (a < b ? -1 : 1)));
    // Counted for /metrics: each page read, and each hand-over (a write) to a stream.
    const after = hub.fanOut;
    expect(after.pages - before.pages).toBe(all1.got.length);
    expect(after.writes - before.writes).toBe(
      [all1, all2, onlyA, domainB].reduce((n, s) => n + s.got.length, 0),
    );
    for (const s of subs) s.close();
  });

  it('reads no events while nobody subscribes; a live subscriber gets what comes after it', async () => {
    expect(hub.subscriberCount).toBe(0);
    const emit = (payload: Record<string, unknown>) =>
      t.tower.write(async (tx) => {
        tx.emit({
          type: 'progress',
          domain_id: null,
          mission_id: null,
          agent_id: null,
          status: null,
          payload,
        });
      });
    const readBefore = hub.eventsRead;
    for (let i = 0; i < 3; i++) await emit({ unseen: i });
    const live = sink();
    const sub = await hub.subscribe(principal('admin', null), {}, null, live);
    await emit({ seen: true });
    await waitFor('the live subscriber to get the new event', () => live.got.flat().length >= 1);
    expect(live.got.flat().map((e) => e.payload)).toEqual([{ seen: true }]);
    expect(hub.eventsRead - readBefore).toBe(1);
    sub.close();
  });
});

describe('feed hub on a store that fails', () => {
  it('ends a new subscription at once when the store cannot say where the feed is', async () => {
    const t = await startTestTower('sqlite');
    try {
      const real = t.tower.store;
      let down = false;
      const gone = {
        selectNoFrom: () => ({ executeTakeFirst: () => Promise.reject(new Error('Connection terminated')) }),
      } as unknown as Store['reader'];
      const store: Store = {
        ...real,
        get reader() {
          return down ? gone : real.reader;
        },
      };
      const hub = new FeedHub({
        store,
        clock: t.tower.clock,
        log: silentLogger(),
        onLocalCommit: () => () => {},
        blocks: [],
      });
      await hub.start();
      down = true;
      const reasons: string[] = [];
      await hub.subscribe(principal('admin', null), {}, null, { ...sink(), closed: (r) => reasons.push(r) });
      expect(reasons).toEqual(['error']);
      expect(hub.subscriberCount).toBe(0);
      await hub.stop();
    } finally {
      await t.close();
    }
  });
});
