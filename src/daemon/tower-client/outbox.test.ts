// The event outbox when state.db refuses writes (full or read-only disk): events are held in
// memory and delivered all the same, delivered rows that cannot be cleared are sent again
// (the tower drops duplicates by key), and nothing fails the caller or the process.
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { makeTempDir } from '../../../test/support/tmp.js';
import { FakeClock } from '../../lib/clock.js';
import { silentLogger } from '../../lib/log.js';
import type { NewEvent } from '../../protocol/events.js';
import { type OpenStateStore, openStateStore } from '../state/store.js';
import type { TowerApi } from './api.js';
import { createOutbox, type Outbox } from './outbox.js';

let tmp: { dir: string; remove(): void };
let state: OpenStateStore;
let outbox: Outbox;
let batches: { key: string; payload: unknown }[][];
let towerUp: boolean;

beforeEach(async () => {
  tmp = makeTempDir('svc-outbox-');
  const clock = new FakeClock(Date.parse('2025-06-02T10:00:00Z'));
  state = openStateStore(join(tmp.dir, 'state.db'), clock);
  batches = [];
  towerUp = true;
  const tower: TowerApi = {
    baseUrl: 'http://tower.test',
    async request<T>(_method: string, _path: string, body?: unknown): Promise<T> {
      if (!towerUp) throw new Error('tower down');
      batches.push((body as { events: { key: string; payload: unknown }[] }).events);
      return {} as T;
    },
  };
  outbox = createOutbox({ state, tower, clock, log: silentLogger() });
  await outbox.start();
});
afterEach(async () => {
  await outbox.stop();
  await state.close();
  tmp.remove();
});

const event = (n: number): NewEvent => ({ type: 'progress', payload: { n } });

describe('event outbox with state.db refusing writes', () => {
  it('holds refused events in memory, delivers them, and clears what it delivered once state.db is back', async () => {
    await outbox.publish(event(1));
    await outbox.flush();
    state.db.exec('pragma query_only = 1');
    await outbox.publish(event(2));
    await outbox.flush();
    const delivered = batches.flat().map((e) => e.payload);
    expect(delivered).toEqual([{ n: 1 }, { n: 2 }]);
    expect(outbox.status?.()).toMatchObject({
      held_in_memory: 0,
      state_error: expect.stringMatching(/SQLITE_READONLY/),
    });

    // A row delivered while state.db refuses its delete stays, and goes again (same key).
    state.db.exec('pragma query_only = 0');
    towerUp = false;
    await outbox.publish(event(3));
    await outbox.flush();
    state.db.exec('pragma query_only = 1');
    towerUp = true;
    batches = [];
    expect(await outbox.flush()).toBe(false);
    state.db.exec('pragma query_only = 0');
    const first = batches.flat().map((e) => e.key);
    batches = [];
    expect(await outbox.flush()).toBe(true);
    expect(batches.flat().map((e) => e.key)).toEqual(first);
    expect(await outbox.pending()).toBe(0);
    await outbox.publish(event(4));
    expect(outbox.status?.()).toMatchObject({ state_error: null });
  });
});
