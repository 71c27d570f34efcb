import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { waitFor } from '../../../test/support/poll.js';
import { STORES, startTestTower, type TestTower } from '../../../test/support/tower.js';
import { FakeClock } from '../../lib/clock.js';
import { silentLogger } from '../../lib/log.js';
import { PRESENCE_RENEW_MS, PRESENCE_TTL_MS, Presence, replicaFresh } from './presence.js';

describe('replicaFresh', () => {
  it('counts a replica until PRESENCE_TTL_MS after its last renewal, not at it', () => {
    const at = Date.parse('2026-11-27T10:00:00Z');
    expect(replicaFresh('2026-11-27T10:00:00.000Z', at + PRESENCE_TTL_MS - 1)).toBe(true);
    expect(replicaFresh('2026-11-27T10:00:00.000Z', at + PRESENCE_TTL_MS)).toBe(false);
  });
});

describe.each(STORES)('node presence on %s', (store) => {
  let t: TestTower;
  const start = Date.parse('2026-11-27T10:00:00Z');
  beforeAll(async () => {
    t = await startTestTower(store);
  });
  afterAll(async () => {
    await t?.close();
  });

  /** A replica's presence on the shared store, with a clock of its own. */
  async function replica(address: string, clock = new FakeClock(start)) {
    const { db } = t.tower.store;
    const p = new Presence({ db, write: t.tower.write, clock, log: silentLogger() });
    await p.start(address);
    return { p, clock };
  }

  it('answers the same holder on every replica, and nothing once released', async () => {
    const a = await replica('http://a');
    const b = await replica('http://b');
    await a.p.held('n-same');
    const holder = { replicaId: a.p.replicaId, address: 'http://a' };
    expect(await a.p.holder('n-same')).toEqual(holder);
    expect(await b.p.holder('n-same')).toEqual(holder);
    expect(await b.p.online(['n-same', 'n-never'])).toEqual(new Set(['n-same']));
    await a.p.released('n-same');
    expect(await b.p.holder('n-same')).toBeNull();
    await a.p.stop();
    await b.p.stop();
  });

  it('moves a node that reconnects elsewhere, and the old replica letting go does not undo it', async () => {
    const a = await replica('http://a');
    const b = await replica('http://b');
    await a.p.held('n-moved');
    await b.p.held('n-moved');
    await a.p.released('n-moved');
    expect((await a.p.holder('n-moved'))?.replicaId).toBe(b.p.replicaId);
    await a.p.stop();
    await b.p.stop();
  });

  it("reads a killed replica's nodes offline once it has not renewed for the TTL, and keeps the live one's", async () => {
    // The killed replica's clock stands still: it never renews again.
    const killed = await replica('http://killed');
    const live = await replica('http://live');
    await killed.p.held('n-on-killed');
    await live.p.held('n-on-live');
    /** One renewal period on the live replica's clock, and its renewal written. */
    const period = async () => {
      await live.clock.advance(PRESENCE_RENEW_MS);
      await waitFor('the renewal', () => live.p.renewedAt === live.clock.now());
    };
    for (let t = PRESENCE_RENEW_MS; t < PRESENCE_TTL_MS; t += PRESENCE_RENEW_MS) await period();
    expect(await live.p.holder('n-on-killed')).not.toBeNull();
    await period();
    expect(await live.p.holder('n-on-killed')).toBeNull();
    expect(await live.p.replica(killed.p.replicaId)).toBeNull();
    expect((await live.p.holder('n-on-live'))?.replicaId).toBe(live.p.replicaId);
    expect(await live.p.online(['n-on-killed', 'n-on-live'])).toEqual(new Set(['n-on-live']));
    await live.p.stop();
  });

  it('records a burst of channel changes in a few writes, the last change of each node winning', async () => {
    const a = await replica('http://burst');
    const ids = Array.from({ length: 1200 }, (_, i) => `n-burst-${i}`);
    await Promise.all(ids.map((id) => a.p.held(id)));
    await Promise.all(ids.slice(0, 600).map((id) => a.p.released(id)));
    expect((await a.p.online(ids)).size).toBe(600);
    expect(await a.p.holder('n-burst-0')).toBeNull();
    expect((await a.p.holder('n-burst-1199'))?.replicaId).toBe(a.p.replicaId);
    await a.p.stop();
    expect(await a.p.holder('n-burst-1199')).toBeNull();
  });
});
