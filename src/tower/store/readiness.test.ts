import { afterEach, describe, expect, it } from 'vitest';
import { openTempStore, type TempStore } from '../../../test/support/store.js';
import { FakeClock, systemClock } from '../../lib/clock.js';
import { silentLogger } from '../../lib/log.js';
import { appendEvents } from '../feed/event-log.js';
import { MIGRATIONS } from '../migrations.js';
import { StoreHealth } from './health.js';
import { migrate } from './open.js';
import { createReadiness } from './readiness.js';
import { createWrite, type Write } from './tx.js';

let temp: TempStore | null = null;
afterEach(async () => {
  await temp?.close();
  temp = null;
});

const full = Object.assign(new Error('database or disk is full'), { code: 'SQLITE_FULL' });

describe('readiness', () => {
  it('says not ready, and why, when the store does not answer within the budget', async () => {
    const clock = new FakeClock(0);
    temp = await openTempStore('sqlite');
    const health = new StoreHealth({ clock, log: silentLogger(), describe: 'test' });
    const never = new Promise<never>(() => {});
    const hung = {
      ...temp.store,
      reader: { selectFrom: () => ({ select: () => ({ limit: () => ({ execute: () => never }) }) }) },
    };
    const ready = createReadiness({
      store: hung as never,
      health,
      write: (() => never) as unknown as Write,
      clock,
      budgetMs: 1500,
    });
    const answer = ready();
    await clock.advance(1500);
    expect(await answer).toEqual({ ready: false, reason: 'the store did not answer within 1500 ms' });
  });

  it('probes a write while writes fail, says which fault, and is ready once a write commits', async () => {
    temp = await openTempStore('sqlite');
    await migrate(temp.store, systemClock, MIGRATIONS);
    const health = new StoreHealth({ clock: systemClock, log: silentLogger(), describe: 'test' });
    const write = createWrite(
      temp.store,
      systemClock,
      { append: appendEvents, committed: () => {} },
      { health },
    );
    const ready = createReadiness({ store: temp.store, health, write, clock: systemClock });
    expect(await ready()).toEqual({ ready: true });
    await expect(write(() => Promise.reject(full))).rejects.toBe(full);
    expect(health.writeFault()).toMatchObject({ kind: 'full', cause: 'SQLITE_FULL', failures: 1 });
    // The probe write commits: the fault was passing (space is back).
    expect(await ready()).toEqual({ ready: true });
    expect(health.writeFault()).toBeNull();
  });

  it('stays not ready while the probe write fails', async () => {
    temp = await openTempStore('sqlite');
    await migrate(temp.store, systemClock, MIGRATIONS);
    const health = new StoreHealth({ clock: systemClock, log: silentLogger(), describe: 'test' });
    const real = createWrite(
      temp.store,
      systemClock,
      { append: appendEvents, committed: () => {} },
      { health },
    );
    let failing = true;
    const write = ((fn: Parameters<Write>[0]) =>
      failing ? real(() => Promise.reject(full)) : real(fn)) as unknown as Write;
    const ready = createReadiness({ store: temp.store, health, write, clock: systemClock });
    await expect(write(async () => 1)).rejects.toBe(full);
    const r = await ready();
    expect(r.ready).toBe(false);
    expect(r.ready === false && r.reason).toMatch(
      /^the store has no space left \(SQLITE_FULL\); writes failing since /,
    );
    failing = false;
    expect(await ready()).toEqual({ ready: true });
  });
});
