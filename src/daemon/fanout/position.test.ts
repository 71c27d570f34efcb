import { afterEach, describe, expect, it } from 'vitest';
import { makeTestDaemonContext, type TestDaemonContext } from '../../../test/support/daemon-ctx.js';
import { FakeClock } from '../../lib/clock.js';
import { FanoutPosition } from './position.js';

describe('FanoutPosition', () => {
  let t: TestDaemonContext | null = null;
  afterEach(async () => {
    await t?.close();
    t = null;
  });

  it('writes the newest relayed id at most once a second and reads it back after a restart', async () => {
    const clock = new FakeClock(Date.parse('2025-01-01T00:00:00Z'));
    t = await makeTestDaemonContext({ clock });
    const errors: unknown[] = [];
    const pos = new FanoutPosition(t.ctx.state, clock, (e) => errors.push(e));
    expect(await pos.load()).toBeNull();
    pos.save('10');
    pos.save('10.1');
    pos.save('11');
    expect(clock.pending()).toBe(1);
    expect(await new FanoutPosition(t.ctx.state, clock, () => {}).load()).toBeNull();
    await clock.advance(1000);
    await pos.flush();
    expect(await new FanoutPosition(t.ctx.state, clock, () => {}).load()).toBe('11');
    pos.save('12.3');
    await pos.flush();
    expect(clock.pending()).toBe(0);
    expect(await new FanoutPosition(t.ctx.state, clock, () => {}).load()).toBe('12.3');
    expect(errors).toEqual([]);
  });
});
