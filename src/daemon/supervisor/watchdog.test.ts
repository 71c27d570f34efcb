import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  afterManualRestart,
  type Decision,
  freshWatch,
  INITIAL_WATCH,
  type Observation,
  step,
  type WatchState,
} from './watchdog.js';

const P = { graceMs: 90_000, throttleMs: 30 * 60_000 };
const S = 1000;
const T0 = 1_000_000_000;
const dead: Observation = { alive: false, paused: false, supervised: true };
const alive: Observation = { alive: true, paused: false, supervised: true };

const afterRestart = (at: number, extra: Partial<WatchState> = {}): WatchState => ({
  ...INITIAL_WATCH,
  lastRestartAt: at,
  restartHeld: false,
  ...extra,
});

describe('watchdog.step decision table', () => {
  const rows: [string, number, WatchState, Observation, Decision][] = [
    [
      'leaves an unsupervised unit alone even when dead',
      T0,
      INITIAL_WATCH,
      { ...dead, supervised: false },
      { action: 'none', reason: 'unsupervised' },
    ],
    [
      'leaves a paused dead unit alone',
      T0,
      INITIAL_WATCH,
      { ...dead, paused: true },
      { action: 'none', reason: 'paused' },
    ],
    [
      'leaves a paused unit alone even in a failed-restart state past the throttle',
      T0 + 3_600_000,
      afterRestart(T0),
      { ...dead, paused: true },
      { action: 'none', reason: 'paused' },
    ],
    [
      'restarts a dead unit that was never restarted',
      T0,
      INITIAL_WATCH,
      dead,
      { action: 'restart', reason: 'dead' },
    ],
    ['leaves an alive unit alone', T0, INITIAL_WATCH, alive, { action: 'none', reason: 'alive' }],
    [
      'does not check a dead unit 1 s after a restart',
      T0 + S,
      afterRestart(T0),
      dead,
      { action: 'none', reason: 'grace' },
    ],
    [
      'does not check a dead unit 89 s after a restart',
      T0 + 89 * S,
      afterRestart(T0),
      dead,
      { action: 'none', reason: 'grace' },
    ],
    [
      'gives up on a unit dead 90 s after its restart, retrying 30 min after that restart',
      T0 + 90 * S,
      afterRestart(T0),
      dead,
      { action: 'give_up', retryAt: T0 + 1800 * S },
    ],
    [
      'reports the give-up once, then stays throttled',
      T0 + 150 * S,
      afterRestart(T0, { gaveUp: true }),
      dead,
      { action: 'none', reason: 'throttled' },
    ],
    [
      'stays throttled 1 s before the retry time',
      T0 + 1799 * S,
      afterRestart(T0, { gaveUp: true }),
      dead,
      { action: 'none', reason: 'throttled' },
    ],
    [
      'retries exactly 30 min after the failed restart',
      T0 + 1800 * S,
      afterRestart(T0, { gaveUp: true }),
      dead,
      { action: 'restart', reason: 'retry' },
    ],
    [
      'restarts at once a unit that died after its restart had held',
      T0 + 600 * S,
      afterRestart(T0, { restartHeld: true }),
      dead,
      { action: 'restart', reason: 'dead' },
    ],
    [
      'does not nightly-restart before the time',
      T0,
      { ...INITIAL_WATCH, nextNightlyAt: T0 + S },
      alive,
      { action: 'none', reason: 'alive' },
    ],
    [
      'nightly-restarts an alive unit at the time',
      T0 + S,
      { ...INITIAL_WATCH, nextNightlyAt: T0 + S },
      alive,
      { action: 'nightly_restart' },
    ],
    [
      'nightly-restarts an alive unit polled after the time',
      T0 + 59 * S,
      { ...INITIAL_WATCH, nextNightlyAt: T0 + S },
      alive,
      { action: 'nightly_restart' },
    ],
    [
      'does not nightly-restart within grace',
      T0 + 10 * S,
      { ...afterRestart(T0), nextNightlyAt: T0 + S },
      alive,
      { action: 'none', reason: 'grace' },
    ],
    [
      'does not nightly-restart a paused unit',
      T0 + S,
      { ...INITIAL_WATCH, nextNightlyAt: T0 },
      { ...alive, paused: true },
      { action: 'none', reason: 'paused' },
    ],
    [
      'restarts (not nightly) a unit dead at its nightly time',
      T0 + S,
      { ...INITIAL_WATCH, nextNightlyAt: T0 },
      dead,
      { action: 'restart', reason: 'dead' },
    ],
  ];
  it.each(rows)('%s', (_name, now, state, obs, expected) => {
    expect(step(now, state, obs, P).decision).toEqual(expected);
  });

  it('records the restart time and an unproven restart when it restarts', () => {
    expect(step(T0, INITIAL_WATCH, dead, P).state).toEqual({
      ...INITIAL_WATCH,
      lastRestartAt: T0,
      restartHeld: false,
    });
  });

  it('marks a restart as held once the unit is seen alive after the grace', () => {
    const s = step(T0 + 90 * S, afterRestart(T0), alive, P).state;
    expect(s).toEqual({ ...afterRestart(T0), restartHeld: true });
  });

  it('clears a give-up once the unit is seen alive again', () => {
    const s = step(T0 + 2000 * S, afterRestart(T0, { gaveUp: true }), alive, P).state;
    expect(s.gaveUp).toBe(false);
    expect(s.restartHeld).toBe(true);
  });

  it('starts the grace window at a manual restart', () => {
    const s = afterManualRestart({ ...INITIAL_WATCH, gaveUp: true }, T0);
    expect(step(T0 + 89 * S, s, dead, P).decision).toEqual({ action: 'none', reason: 'grace' });
    expect(step(T0 + 90 * S, s, dead, P).decision).toEqual({ action: 'give_up', retryAt: T0 + 1800 * S });
  });

  it('gives a fresh watch no restart history', () => {
    expect(freshWatch(T0)).toEqual({ ...INITIAL_WATCH, nextNightlyAt: T0 });
  });
});

/** Drives step() over a series of polls, as the supervisor does. */
function simulate(
  polls: { dt: number; alive: boolean; paused: boolean }[],
  p = P,
): { at: number; decision: Decision }[] {
  let now = T0;
  let s: WatchState = INITIAL_WATCH;
  const out: { at: number; decision: Decision }[] = [];
  for (const poll of polls) {
    now += poll.dt;
    const r = step(now, s, { alive: poll.alive, paused: poll.paused, supervised: true }, p);
    s = r.state;
    out.push({ at: now, decision: r.decision });
  }
  return out;
}

const pollsArb = fc.array(
  fc.record({ dt: fc.integer({ min: 1, max: 400 * S }), alive: fc.boolean(), paused: fc.boolean() }),
  { maxLength: 120 },
);
const policyArb = fc
  .record({ graceMs: fc.integer({ min: 1, max: 600 * S }), extra: fc.integer({ min: 0, max: 3600 * S }) })
  .map(({ graceMs, extra }) => ({ graceMs, throttleMs: graceMs + extra }));

describe('watchdog.step properties', () => {
  it('never restarts a paused unit', () => {
    fc.assert(
      fc.property(pollsArb, policyArb, (polls, p) => {
        for (const [i, r] of simulate(polls, p).entries()) {
          if (polls[i]?.paused) expect(r.decision.action).toBe('none');
        }
      }),
    );
  });

  it('never acts within grace of its own last restart', () => {
    fc.assert(
      fc.property(pollsArb, policyArb, (polls, p) => {
        let last: number | null = null;
        for (const r of simulate(polls, p)) {
          if (last !== null && r.at - last < p.graceMs) expect(r.decision.action).toBe('none');
          if (r.decision.action === 'restart' || r.decision.action === 'nightly_restart') last = r.at;
        }
      }),
    );
  });

  it('restarts an always-dead unit at most once per throttle window after the first attempt', () => {
    fc.assert(
      fc.property(fc.array(fc.integer({ min: 1, max: 400 * S }), { maxLength: 200 }), policyArb, (dts, p) => {
        const restarts = simulate(
          dts.map((dt) => ({ dt, alive: false, paused: false })),
          p,
        )
          .filter((r) => r.decision.action === 'restart')
          .map((r) => r.at);
        for (let i = 1; i < restarts.length; i++) {
          expect(restarts[i]! - restarts[i - 1]!).toBeGreaterThanOrEqual(p.throttleMs);
        }
      }),
    );
  });

  it('reports at most one give-up between two restarts', () => {
    fc.assert(
      fc.property(pollsArb, policyArb, (polls, p) => {
        let giveUps = 0;
        for (const r of simulate(polls, p)) {
          if (r.decision.action === 'restart' || r.decision.action === 'nightly_restart') giveUps = 0;
          if (r.decision.action === 'give_up') giveUps++;
          expect(giveUps).toBeLessThanOrEqual(1);
        }
      }),
    );
  });

  it('never restarts a unit that is alive at every poll when no nightly restart is set', () => {
    fc.assert(
      fc.property(pollsArb, policyArb, (polls, p) => {
        const all = simulate(
          polls.map((x) => ({ ...x, alive: true })),
          p,
        );
        expect(all.every((r) => r.decision.action === 'none')).toBe(true);
      }),
    );
  });

  it('restarts an always-dead unit at the first poll once the throttle has passed', () => {
    fc.assert(
      fc.property(
        fc.array(fc.integer({ min: 1, max: 400 * S }), { minLength: 1, maxLength: 200 }),
        policyArb,
        (dts, p) => {
          const results = simulate(
            dts.map((dt) => ({ dt, alive: false, paused: false })),
            p,
          );
          let last: number | null = null;
          for (const r of results) {
            const due = last === null || r.at - last >= p.throttleMs;
            expect(r.decision.action === 'restart').toBe(due);
            if (r.decision.action === 'restart') last = r.at;
          }
        },
      ),
    );
  });
});
