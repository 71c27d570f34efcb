import { describe, expect, it } from 'vitest';
import { FakeClock, iso } from '../../lib/clock.js';
import type { FeedEvent } from '../../protocol/events.js';
import { RateHold } from './hold.js';

const T0 = Date.parse('2025-03-01T12:00:00.000Z');

function ev(id: number, remaining: number | null, resetAt = T0 + 10_000): FeedEvent {
  return {
    id: String(id),
    ts: iso(T0),
    type: 'matrix',
    domain_id: null,
    mission_id: null,
    agent_id: null,
    status: null,
    payload: { n: id },
    ...(remaining === null ? {} : { rate_limit: { limit: 5, remaining, reset_at: iso(resetAt) } }),
  };
}

function setup() {
  const clock = new FakeClock(T0);
  const released: string[][] = [];
  const hold = new RateHold({ clock, marginMs: 1000, release: (evs) => released.push(evs.map((e) => e.id)) });
  return { clock, hold, released };
}

describe('RateHold', () => {
  it('passes events while the quota has room or no rate_limit block is sent', () => {
    const { hold } = setup();
    expect(hold.offer(ev(1, 3))).toBe('pass');
    expect(hold.offer(ev(2, null))).toBe('pass');
    expect(hold.holding).toBe(false);
  });

  it('holds from the event that reports remaining 0 until reset_at + 1 s, then releases all in order', async () => {
    const { clock, hold, released } = setup();
    expect(hold.offer(ev(1, 0))).toBe('held');
    expect(hold.offer(ev(2, 0))).toBe('held');
    // A later window already reported by the tower does not end the hold early.
    expect(hold.offer(ev(3, 4, T0 + 20_000))).toBe('held');
    expect(hold.status()).toMatchObject({ holding: true, held: 3, until: iso(T0 + 11_000) });
    await clock.advance(10_999);
    expect(released).toEqual([]);
    await clock.advance(1);
    expect(released).toEqual([['1', '2', '3']]);
    expect(hold.holding).toBe(false);
    expect(hold.offer(ev(4, 4, T0 + 20_000))).toBe('pass');
  });

  it('extends the hold when a later event reports a later exhausted window', async () => {
    const { clock, hold, released } = setup();
    hold.offer(ev(1, 0, T0 + 5_000));
    await clock.advance(3_000);
    hold.offer(ev(2, 0, T0 + 9_000));
    await clock.advance(3_000);
    expect(released).toEqual([]);
    await clock.advance(4_000);
    expect(released).toEqual([['1', '2']]);
    const [rec] = hold.throttles();
    expect(rec).toEqual({
      since: iso(T0),
      reset_at: iso(T0 + 9_000),
      until: iso(T0 + 10_000),
      held: 2,
      resumed_at: iso(T0 + 10_000),
    });
  });

  it('relays at once when reset_at (+ margin) is already past or unreadable', () => {
    const { hold } = setup();
    expect(hold.offer(ev(1, 0, T0 - 1_000))).toBe('pass');
    const bad = ev(2, 0);
    (bad.rate_limit as { reset_at: string }).reset_at = 'soon';
    expect(hold.offer(bad)).toBe('pass');
  });

  it('wakes waiters on release and keeps a bounded throttle history', async () => {
    const clock = new FakeClock(T0);
    const hold = new RateHold({ clock, marginMs: 1000, release: () => {}, historySize: 2 });
    for (let i = 0; i < 3; i++) {
      hold.offer(ev(i + 1, 0, clock.now() + 1000));
      let woke = false;
      void hold.whenReleased().then(() => {
        woke = true;
      });
      await clock.advance(2000);
      expect(woke).toBe(true);
    }
    expect(hold.throttles()).toHaveLength(2);
    expect(hold.status().total_held).toBe(3);
  });

  it('stop() releases what is held and cancels the timer', () => {
    const { clock, hold, released } = setup();
    hold.offer(ev(1, 0));
    hold.stop();
    expect(released).toEqual([['1']]);
    expect(clock.pending()).toBe(0);
  });
});
