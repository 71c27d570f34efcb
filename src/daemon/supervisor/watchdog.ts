// The watchdog's one decision (docs/agents.md, Watchdog): at a poll, given what a
// unit looks like now and what happened to it before, restart it now or not. Pure: no
// clock, no I/O; the supervisor observes, calls step(), and carries out the action.
//
//   paused or not supervised           → leave it
//   within `grace` of a (re)start      → leave it (no check at all)
//   alive                              → the last restart held; nightly restart if due
//   dead, last restart held (or none)  → restart
//   dead again after a restart         → give up (reported once), retry when `throttle`
//                                        has passed since that restart: at most one
//                                        attempt per throttle window

export interface WatchdogPolicy {
  graceMs: number;
  throttleMs: number;
}

export interface WatchState {
  /** When the watchdog (or an operator) last restarted the unit; null: never since start. */
  lastRestartAt: number | null;
  /** The unit was seen alive after the grace following lastRestartAt: that restart worked. */
  restartHeld: boolean;
  /** A give-up was already reported for the current failed restart. */
  gaveUp: boolean;
  /** Next nightly restart (ms), or null when the agent has none. */
  nextNightlyAt: number | null;
}

export interface Observation {
  alive: boolean;
  paused: boolean;
  /** supervise = true and the operator has not stopped it. */
  supervised: boolean;
}

export type Decision =
  | { action: 'none'; reason: 'unsupervised' | 'paused' | 'grace' | 'alive' | 'throttled' }
  | { action: 'restart'; reason: 'dead' | 'retry' }
  | { action: 'give_up'; retryAt: number }
  | { action: 'nightly_restart' };

export const INITIAL_WATCH: WatchState = {
  lastRestartAt: null,
  restartHeld: true,
  gaveUp: false,
  nextNightlyAt: null,
};

/** The decision at time `now` and the state after carrying it out. */
export function step(
  now: number,
  s: WatchState,
  obs: Observation,
  p: WatchdogPolicy,
): { decision: Decision; state: WatchState } {
  const none = (reason: Extract<Decision, { action: 'none' }>['reason'], state = s) => ({
    decision: { action: 'none' as const, reason },
    state,
  });
  const restarted = (decision: Decision) => ({
    decision,
    state: { ...s, lastRestartAt: now, restartHeld: false, gaveUp: false },
  });
  if (!obs.supervised) return none('unsupervised');
  if (obs.paused) return none('paused');
  if (s.lastRestartAt !== null && now - s.lastRestartAt < p.graceMs) return none('grace');
  if (obs.alive) {
    if (s.nextNightlyAt !== null && now >= s.nextNightlyAt) return restarted({ action: 'nightly_restart' });
    return none('alive', s.restartHeld && !s.gaveUp ? s : { ...s, restartHeld: true, gaveUp: false });
  }
  const failedRestart = s.lastRestartAt !== null && !s.restartHeld;
  if (!failedRestart) return restarted({ action: 'restart', reason: 'dead' });
  const retryAt = (s.lastRestartAt ?? now) + p.throttleMs;
  if (now >= retryAt) return restarted({ action: 'restart', reason: 'retry' });
  if (!s.gaveUp) return { decision: { action: 'give_up', retryAt }, state: { ...s, gaveUp: true } };
  return none('throttled');
}

/** After an operator's restart: grace applies, and dying again counts as a failed restart. */
export function afterManualRestart(s: WatchState, now: number): WatchState {
  return { ...s, lastRestartAt: now, restartHeld: false, gaveUp: false };
}

/** After start, resume or reload: a clean slate (an earlier give-up no longer holds). */
export function freshWatch(nextNightlyAt: number | null): WatchState {
  return { ...INITIAL_WATCH, nextNightlyAt };
}
