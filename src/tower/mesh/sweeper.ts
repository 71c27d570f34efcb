// The lease sweeper: sweeps expired leases every second until stopped. Stopping waits for a
// sweep under way, so none touches a closed store. A failing sweep is logged and retried.
import type { Clock, TimerHandle } from '../../lib/clock.js';
import type { Logger } from '../../lib/log.js';
import { storeFault } from '../store/faults.js';

export const SWEEP_EVERY_MS = 1000;

/** Starts sweeping; the function returned stops it. */
export function startSweeper(deps: {
  sweep: () => Promise<number>;
  clock: Clock;
  log: Logger;
}): () => Promise<void> {
  const { sweep, clock, log } = deps;
  let timer: TimerHandle | null = null;
  let stopped = false;
  let inFlight: Promise<void> | null = null;
  let storeDown = false;
  const sweepOnce = async () => {
    try {
      await sweep();
      storeDown = false;
    } catch (e) {
      // A store fault is logged by the store's health; here once per outage.
      const fault = storeFault(e);
      if (!fault) log.warn({ err: e }, 'mesh lease sweep failed; retrying');
      else if (!storeDown) {
        storeDown = true;
        log.warn({ cause: fault.cause }, 'mesh lease sweep failed: the store is not writable; retrying');
      }
    }
  };
  const tick = () => {
    timer = clock.setTimeout(async () => {
      inFlight = sweepOnce();
      await inFlight;
      inFlight = null;
      if (!stopped) tick();
    }, SWEEP_EVERY_MS);
  };
  tick();
  return async () => {
    stopped = true;
    timer?.cancel();
    await inFlight;
  };
}
