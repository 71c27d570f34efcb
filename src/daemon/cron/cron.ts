// svcd's cron component: ticks at each minute boundary of the injected clock, makes each due
// fire's dedup key durable in state.db, then dispatches it. It only sequences: decisions are
// due-jobs.ts, one fire fire.ts, recording outcomes.ts, SQL store.ts, processes bash.ts.
import type { Clock, TimerHandle } from '../../lib/clock.js';
import { iso } from '../../lib/clock.js';
import type { Logger } from '../../lib/log.js';
import type { CronFire, CronFireEventPayload, CronGc, CronReload } from '../../protocol/cron.js';
import { isSvcError, SvcError } from '../../protocol/errors.js';
import type { Component } from '../component.js';
import type { CronMetrics } from '../metrics.js';
import type { DaemonPaths } from '../paths.js';
import type { StateStore } from '../state/store.js';
import type { EventOutbox } from '../tower-client/outbox.js';
import { type CronConfig, type CronJob, jobFingerprint, loadCronConfig } from './config.js';
import { dueJobs, heartbeatSlots } from './due-jobs.js';
import { dispatchFire, type Entry, entryOf, eventOf as eventOfFire, type FireDeps } from './fire.js';
import { CronOutcomes } from './outcomes.js';
import { MINUTE_MS, minuteOf } from './schedule.js';
import * as store from './store.js';

/** Dedup keys of minutes older than this are dropped (hourly, and by cron.gc). */
export const DEDUP_KEEP_MS = 24 * 60 * 60_000;
const GC_EVERY_MS = 60 * 60_000;

/** Why cron is not firing: state.db refused the dedup keys (cron status `state_error`). */
export interface CronStateFault {
  /** state.db */
  file: string;
  /** When it started refusing (ISO 8601). */
  since: string;
  /** The error, with SQLite's code: "SQLITE_FULL: database or disk is full". */
  detail: string;
  /** Fires that were due and were skipped since. */
  skipped_fires: number;
  /** The last minute skipped. */
  last_minute: string;
}

/** What cron uses of svcd (daemon.ts passes its DaemonContext). */
export interface CronContext {
  clock: Clock;
  log: Logger;
  paths: Pick<DaemonPaths, 'cronToml' | 'stateDb' | 'home'>;
  /** svcd's environment, the base of bash jobs'. */
  env: NodeJS.ProcessEnv;
  state: StateStore;
  events: EventOutbox;
  identity: { node_id: string };
}

export interface CronDeps {
  /** `svc agent signal` to an agent id or profile (the supervisor's). */
  signal: (target: string, prompt: string) => Promise<unknown>;
  /** Fires, skips, failures and lag are counted here (svcd's metrics). */
  metrics?: CronMetrics;
}

/** What methods.ts reads; also handy in tests. */
export interface CronState {
  config: CronConfig;
  configError: string | null;
  /** The minute this process last ticked, null before its first tick. */
  tickedMinute: number | null;
  heartbeats: ReadonlyMap<string, number>;
  running: ReadonlyMap<string, { id: number; minute: number }>;
  /** Set while state.db refuses the dedup keys (nothing fires). */
  stateFault: CronStateFault | null;
}

export interface Cron extends Component {
  state(): CronState;
  reload(): Promise<CronReload>;
  gc(): Promise<CronGc>;
  history(job: string, limit: number): Promise<CronFire[]>;
  lastFires(): Promise<Map<string, CronFire>>;
  /** Resolves when every fire started so far has finished and been recorded. */
  idle(): Promise<void>;
}

interface Running {
  id: number;
  minute: number;
  done: Promise<void>;
  /** Kills a bash job (svcd stopping). */
  abort: AbortController;
}

export function createCron(ctx: CronContext, deps: CronDeps): Cron {
  const log = ctx.log.child({ component: 'cron' });
  const db = ctx.state.db as unknown as store.CronDb;
  const { clock } = ctx;
  const file = ctx.paths.cronToml;

  let config: CronConfig = { file, timezone: null, jobs: [] };
  let configError: string | null = null;
  let lastTick: number | null = null;
  let tickedMinute: number | null = null;
  let heartbeats = new Map<string, number>();
  let lastGc = 0;
  /** Set while state.db cannot take the tick's dedup keys: nothing fires then. */
  let stateFault: CronStateFault | null = null;
  const running = new Map<string, Running>();

  let timer: TimerHandle | null = null;
  let ticking: Promise<void> | null = null;
  let started = false;
  let stopped = false;
  let stopping: Promise<void> | null = null;
  const outcomes = new CronOutcomes({ db, events: ctx.events, log });
  const publish = (payload: CronFireEventPayload) => outcomes.publish(payload);
  const eventOf = (entry: Entry, r: Parameters<typeof eventOfFire>[2]) =>
    eventOfFire(ctx.identity.node_id, entry, r);
  const fireDeps: FireDeps = { signal: deps.signal, clock, env: ctx.env, home: ctx.paths.home };

  function schedule(): void {
    if (stopped) return;
    const now = clock.now();
    timer = clock.setTimeout(onTimer, minuteOf(now) + MINUTE_MS - now);
  }

  function onTimer(): void {
    timer = null;
    const minute = minuteOf(clock.now());
    // A timer may wake a hair early; the minute is then the one already processed.
    if (minute === tickedMinute) {
      schedule();
      return;
    }
    ticking = tick(minute)
      .catch((e: unknown) => log.error({ err: e, minute: iso(minute) }, 'cron tick failed'))
      .finally(() => {
        ticking = null;
        schedule();
      });
  }

  async function tick(minute: number): Promise<void> {
    const jobs = config.jobs;
    const decisions = dueJobs({
      jobs,
      minute,
      lastTick,
      heartbeats,
      running,
    });
    const now = clock.now();
    const entries = decisions.map((d) => entryOf(d, now, running.get(d.job.name)?.minute ?? null));
    const slots = heartbeatSlots(decisions);
    // The dedup keys are durable (synchronous = FULL) before anything is dispatched: a
    // restart inside this minute finds them and fires nothing twice.
    // A clock set back does not move lastTick back: the minutes after it were handled.
    const newLastTick = lastTick === null ? minute : Math.max(lastTick, minute);
    let admitted: store.Admitted<Entry>[];
    try {
      admitted = await store.admit(db, newLastTick, entries, slots, now);
    } catch (e) {
      refused(minute, entries, e);
      return;
    }
    if (stateFault) {
      log.warn(
        { file: ctx.paths.stateDb, since: stateFault.since, skipped: stateFault.skipped_fires },
        'state.db takes writes again: cron fires resume',
      );
      stateFault = null;
    }
    lastTick = newLastTick;
    tickedMinute = minute;
    for (const [job, slot] of slots) heartbeats.set(job, slot);

    for (const { entry, id } of admitted) {
      if (entry.outcome !== 'running') continue;
      deps.metrics?.fires.inc({ job: entry.job });
      deps.metrics?.fireDelay.observe(((entry.startedAt ?? now) - entry.scheduledMinute) / 1000);
      startFire(entry.decision.job, entry, id);
    }
    for (const { entry } of admitted) {
      if (entry.outcome !== 'skipped') continue;
      deps.metrics?.skips.inc({ job: entry.job, reason: entry.reason ?? 'unknown' });
      void publish(eventOf(entry, { outcome: 'skipped', exitCode: null, durationMs: null }));
      if (outcomes.trimDue(entry.job)) await store.trim(db, entry.job);
    }
    if (admitted.length > 0) {
      log.debug({ minute: iso(minute), fired: admitted.length }, 'cron tick');
    }
    if (minute - lastGc >= GC_EVERY_MS) {
      lastGc = minute;
      const removed = await store.gc(db, clock.now() - DEDUP_KEEP_MS);
      if (removed > 0) log.debug({ removed }, 'dropped old cron dedup keys');
    }
  }

  /**
   * The tick's dedup keys could not be made durable (state.db full, read-only, failing):
   * firing anyway could fire twice after a restart in this minute, so nothing fires. Each
   * fire that was due is reported as skipped (state_unwritable) on the feed, the fault is in
   * cron's status (svc system doctor), and the minute counts as handled, so it is not caught
   * up later as if svcd had been down.
   */
  function refused(minute: number, entries: readonly Entry[], e: unknown): void {
    const due = entries.filter((x) => x.outcome === 'running');
    const cause = (e as { code?: unknown }).code;
    const detail = `${typeof cause === 'string' ? `${cause}: ` : ''}${(e as Error).message}`;
    const first = stateFault === null;
    stateFault = {
      file: ctx.paths.stateDb,
      since: stateFault?.since ?? iso(clock.now()),
      detail,
      skipped_fires: (stateFault?.skipped_fires ?? 0) + due.length,
      last_minute: iso(minute),
    };
    const logged = { err: detail, file: ctx.paths.stateDb, minute: iso(minute), jobs: due.map((x) => x.job) };
    if (first || due.length > 0) {
      log.error(
        logged,
        'state.db cannot be written: cron fires of this minute are skipped, never fired twice',
      );
    }
    lastTick = lastTick === null ? minute : Math.max(lastTick, minute);
    tickedMinute = minute;
    for (const entry of due) {
      deps.metrics?.skips.inc({ job: entry.job, reason: 'state_unwritable' });
      void publish(
        eventOf(
          { ...entry, outcome: 'skipped', reason: 'state_unwritable' },
          { outcome: 'skipped', exitCode: null, durationMs: null },
        ),
      );
    }
  }

  function startFire(job: CronJob, entry: Entry, id: number): void {
    const startedAt = entry.startedAt ?? clock.now();
    const abort = new AbortController();
    const done = dispatchFire(job, entry, abort.signal, fireDeps)
      .catch((e: unknown) => ({
        outcome: 'failed' as const,
        exitCode: null,
        outputTail: null,
        detail: `dispatch failed: ${(e as Error).message}`,
      }))
      .then((r) => {
        const now = clock.now();
        const finish: store.Finish = {
          id,
          outcome: r.outcome,
          finishedAt: now,
          durationMs: now - startedAt,
          exitCode: r.exitCode,
          outputTail: r.outputTail,
          detail: entry.detail && r.detail ? `${entry.detail}; ${r.detail}` : (r.detail ?? entry.detail),
        };
        running.delete(job.name);
        if (r.outcome !== 'ok') deps.metrics?.failures.inc({ job: job.name, outcome: r.outcome });
        return outcomes.record(job.name, finish, eventOf(entry, finish));
      });
    running.set(job.name, { id, minute: entry.scheduledMinute, done, abort });
  }

  async function loadInitial(): Promise<void> {
    try {
      config = await loadCronConfig(file);
    } catch (e) {
      configError = (e as Error).message;
      log.error(
        { err: configError },
        'cron.toml is invalid: no cron jobs run until it is fixed and reloaded',
      );
    }
  }

  const cron: Cron = {
    name: 'cron',
    async start() {
      if (started) return;
      started = true;
      await ctx.state.migrate('cron', store.CRON_MIGRATIONS);
      for (const f of await store.interruptLeftovers(db, clock.now())) {
        void publish({
          kind: 'cron.fire',
          node_id: ctx.identity.node_id,
          job: f.job,
          scheduled_minute: f.scheduled_minute,
          dispatch: f.dispatch,
          outcome: 'interrupted',
          reason: null,
          catch_up: f.catch_up,
          exit_code: null,
          duration_ms: null,
        });
      }
      await loadInitial();
      lastTick = await store.lastTick(db);
      heartbeats = await store.heartbeatSlotsOf(db);
      // The current minute counts: a job due in it fires now unless its dedup key says a
      // previous svcd already fired it.
      ticking = tick(minuteOf(clock.now())).finally(() => {
        ticking = null;
      });
      await ticking;
      schedule();
      log.info({ jobs: config.jobs.length, file }, 'cron started');
    },
    stop() {
      stopping ??= (async () => {
        stopped = true;
        timer?.cancel();
        timer = null;
        await ticking?.catch(() => {});
        for (const r of running.values()) r.abort.abort();
        await Promise.all([...running.values()].map((r) => r.done));
        await outcomes.flushed();
      })();
      return stopping;
    },
    status: () => ({
      jobs: config.jobs.length,
      running: running.size,
      last_tick: tickedMinute === null ? null : iso(tickedMinute),
      config_error: configError,
      state_error: stateFault,
    }),
    state: () => ({ config, configError, tickedMinute, heartbeats, running, stateFault }),
    async reload() {
      let next: CronConfig;
      try {
        next = await loadCronConfig(file);
      } catch (e) {
        if (isSvcError(e)) configError = e.message;
        throw e;
      }
      const before = new Map(config.jobs.map((j) => [j.name, jobFingerprint(j)]));
      const after = new Map(next.jobs.map((j) => [j.name, jobFingerprint(j)]));
      const result: CronReload = {
        file,
        jobs: next.jobs.length,
        added: [...after.keys()].filter((n) => !before.has(n)),
        removed: [...before.keys()].filter((n) => !after.has(n)),
        changed: [...after.keys()].filter((n) => before.has(n) && before.get(n) !== after.get(n)),
      };
      config = next;
      configError = null;
      log.info(result, 'cron.toml reloaded');
      return result;
    },
    async gc() {
      const cutoff = clock.now() - DEDUP_KEEP_MS;
      return { removed: await store.gc(db, cutoff), older_than: iso(cutoff) };
    },
    history: (job, limit) => store.history(db, job, limit),
    lastFires: () => store.lastFires(db),
    async idle() {
      while (running.size > 0 || outcomes.busy) {
        await Promise.all([...running.values()].map((r) => r.done));
        await outcomes.flushed();
      }
    },
  };
  return cron;
}

/** The stand-in for `signal` until the supervisor is wired in: every signal job fails clearly. */
export async function signalUnavailable(target: string): Promise<never> {
  throw new SvcError(
    'agent_not_found',
    `no agent "${target}" to signal: this svcd has no agent supervisor yet, so signal jobs cannot run`,
  );
}
