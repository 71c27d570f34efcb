// The watchdog loop: at every [watchdog] poll, probes all units, asks watchdog.ts's step()
// about each agent and carries the decision out (restart, nightly restart, give-up). One poll
// at a time; stop() cancels the timer and waits for a poll under way.
import type { Clock, TimerHandle } from '../../lib/clock.js';
import { iso } from '../../lib/clock.js';
import type { Logger } from '../../lib/log.js';
import type { SupervisorMetrics } from '../metrics.js';
import { type Agent, exclusive, nightlyOf } from './agent.js';
import type { AgentTable } from './agent-table.js';
import type { SupervisorSettings } from './config-section.js';
import type { SupervisorEvents } from './events.js';
import type { UnitLifecycle } from './lifecycle.js';
import { type Decision, step } from './watchdog.js';

export interface WatchdogLoopDeps {
  clock: Clock;
  log: Logger;
  table: AgentTable;
  lifecycle: UnitLifecycle;
  events: SupervisorEvents;
  settings: () => SupervisorSettings;
  metrics?: Pick<SupervisorMetrics, 'watchdogActions'>;
}

export interface WatchdogLoop {
  /** Schedules the first poll, one poll interval from now. */
  start(): void;
  /** One poll now (what the timer does every poll interval). */
  poll(): Promise<void>;
  /** The poll interval changed (reload): the next poll is one new interval from now. */
  reschedule(): void;
  stop(): Promise<void>;
}

export function createWatchdogLoop(deps: WatchdogLoopDeps): WatchdogLoop {
  const { clock, log, table, lifecycle, events } = deps;
  let timer: TimerHandle | null = null;
  let polling: Promise<void> | null = null;
  let stopped = false;

  async function act(a: Agent, decision: Decision): Promise<void> {
    if (decision.action !== 'none') deps.metrics?.watchdogActions.inc({ action: decision.action });
    switch (decision.action) {
      case 'none':
        return;
      case 'restart':
        log.warn({ agent: a.spec.id, reason: decision.reason }, 'watchdog restarts dead agent');
        await lifecycle.restartNow(
          a,
          decision.reason === 'retry' ? 'dead (retry after throttle)' : 'dead',
          'agent.restarted',
        );
        return;
      case 'nightly_restart':
        log.info({ agent: a.spec.id }, 'nightly restart');
        await lifecycle.restartNow(a, 'nightly', 'agent.nightly_restart');
        return;
      case 'give_up':
        a.gaveUpUntil = decision.retryAt;
        log.error(
          { agent: a.spec.id, retry_at: iso(decision.retryAt) },
          'agent died again after restart; giving up until retry',
        );
        await lifecycle.remember(
          a,
          'give_up',
          `dead again after restart; next attempt at ${iso(decision.retryAt)}`,
        );
        await events.matrix(a, 'agent.gave_up', 'dead again after restart', {
          retry_at: iso(decision.retryAt),
        });
        return;
    }
  }

  async function pollOnce(): Promise<void> {
    const list = table.all();
    const alive = await lifecycle.probe(list);
    const w = deps.settings().watchdog;
    await Promise.all(
      list.map((a) =>
        exclusive(a, async () => {
          if (!table.holds(a)) return; // replaced by a reload meanwhile
          const now = clock.now();
          const isAlive = a.state === 'running' && (alive.get(a) ?? false);
          const r = step(
            now,
            a.watch,
            { alive: isAlive, paused: a.paused, supervised: a.spec.supervise && a.desired === 'running' },
            { graceMs: w.graceMs, throttleMs: w.throttleMs },
          );
          a.watch = r.state;
          if (a.watch.nextNightlyAt !== null && now >= a.watch.nextNightlyAt) {
            a.watch = { ...a.watch, nextNightlyAt: nightlyOf(a.spec, deps.settings(), now) };
          }
          if (r.decision.action === 'none' && isAlive) a.gaveUpUntil = null;
          await act(a, r.decision).catch((e: unknown) => {
            log.error({ err: (e as Error).message, agent: a.spec.id }, 'watchdog action failed');
          });
        }),
      ),
    );
  }

  function schedule(): void {
    if (stopped) return;
    timer = clock.setTimeout(() => {
      timer = null;
      polling = pollOnce()
        .catch((e: unknown) => log.error({ err: e }, 'watchdog poll failed'))
        .finally(() => {
          polling = null;
          schedule();
        });
    }, deps.settings().watchdog.pollMs);
  }

  return {
    start() {
      stopped = false;
      schedule();
    },
    poll: () => pollOnce(),
    reschedule() {
      // Only a waiting timer moves; a poll under way schedules the next one when it ends.
      if (!timer) return;
      timer.cancel();
      timer = null;
      if (!polling) schedule();
    },
    async stop() {
      stopped = true;
      timer?.cancel();
      timer = null;
      await polling;
    },
  };
}
