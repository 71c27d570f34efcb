// svcd's cron component: ticks at every minute boundary of the injected clock, asks
// due-jobs.ts what the minute holds, claims each fire's dedup key in state.db before
// dispatching it, and records outcomes, skips and matrix events. Decisions live in
// due-jobs.ts, SQL in store.ts, processes in bash.ts; this file only sequences them.
import type { TimerHandle } from '../../lib/clock.js';
import { iso } from '../../lib/clock.js';
import type { CronFire, CronFireEventPayload, CronGc, CronReload } from '../../protocol/cron.js';
import { isSvcError, SvcError } from '../../protocol/errors.js';
import type { Component, DaemonContext } from '../context.js';
import { runBash } from './bash.js';
import { type CronConfig, type CronJob, jobFingerprint, loadCronConfig } from './config.js';
import { type Decision, dueJobs, heartbeatSlots } from './due-jobs.js';
import { registerCronMethods } from './methods.js';
import { MINUTE_MS, minuteOf } from './schedule.js';
import * as store from './store.js';

/** Dedup keys of minutes older than this are dropped (hourly, and by cron.gc). */
export const DEDUP_KEEP_MS = 24 * 60 * 60_000;
const GC_EVERY_MS = 60 * 60_000;
const TRIM_EVERY = 10;

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

export interface CronDeps {
  /** `svc agent signal` to an agent id or profile (the supervisor's). */
  signal: (target: string, prompt: string) => Promise<unknown>;
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

interface Entry extends store.NewEntry {
  decision: Decision;
}

interface Running {
  id: number;
  minute: number;
  done: Promise<void>;
  /** Kills a bash job (svcd stopping). */
  abort: AbortController;
}

export function createCron(ctx: DaemonContext, deps: CronDeps): Cron {
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
  /** Fires per job since its history was last trimmed to the newest 100. */
  const sinceTrim = new Map<string, number>();

  let finished: { job: string; finish: store.Finish; event: CronFireEventPayload }[] = [];
  let flushing: Promise<void> | null = null;

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
    const entries = decisions.map((d) => entryOf(d, now));
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
      if (entry.outcome === 'running') startFire(entry.decision.job, entry, id);
    }
    for (const { entry } of admitted) {
      if (entry.outcome !== 'skipped') continue;
      void publish(eventOf(entry, { outcome: 'skipped', exitCode: null, durationMs: null }));
      if (trimDue(entry.job)) await store.trim(db, entry.job);
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
      void publish(
        eventOf(
          { ...entry, outcome: 'skipped', reason: 'state_unwritable' },
          { outcome: 'skipped', exitCode: null, durationMs: null },
        ),
      );
    }
  }

  function entryOf(d: Decision, now: number): Entry {
    const base = { decision: d, job: d.job.name, scheduledMinute: d.minute, dispatch: d.job.dispatch };
    if (d.action === 'fire') {
      return {
        ...base,
        outcome: 'running',
        reason: null,
        catchUp: d.missed !== null,
        startedAt: now,
        detail: d.missed
          ? `catch-up (catch_up = "latest") of the most recent minute missed while svcd was down (${missedText(d.missed)})`
          : null,
      };
    }
    let detail: string;
    if (d.reason === 'disabled') detail = 'the job is disabled (enabled = false)';
    else if (d.reason === 'overlap') {
      const r = running.get(d.job.name);
      detail = `the fire of ${r ? iso(r.minute) : 'an earlier minute'} is still running`;
    } else {
      detail = `missed while svcd was down (${d.missed ? missedText(d.missed) : 'one minute'}); not caught up`;
      if (d.job.catchUp === 'latest') {
        detail += d.job.enabled
          ? ' because the job is due in this minute anyway'
          : ' because the job is disabled';
      }
    }
    return { ...base, outcome: 'skipped', reason: d.reason, catchUp: false, startedAt: null, detail };
  }

  function startFire(job: CronJob, entry: Entry, id: number): void {
    const startedAt = entry.startedAt ?? clock.now();
    const abort = new AbortController();
    const done = dispatch(job, entry, abort.signal)
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
        return record(job.name, finish, eventOf(entry, finish));
      });
    running.set(job.name, { id, minute: entry.scheduledMinute, done, abort });
  }

  async function dispatch(
    job: CronJob,
    entry: Entry,
    signal: AbortSignal,
  ): Promise<{
    outcome: store.Finish['outcome'];
    exitCode: number | null;
    outputTail: string | null;
    detail: string | null;
  }> {
    if (job.dispatch === 'signal') {
      try {
        await deps.signal(job.session ?? '', job.prompt);
        return { outcome: 'ok', exitCode: null, outputTail: null, detail: null };
      } catch (e) {
        const code = isSvcError(e) ? ` [${e.code}]` : '';
        return {
          outcome: 'failed',
          exitCode: null,
          outputTail: null,
          detail: `signal to "${job.session}" failed: ${(e as Error).message}${code}`,
        };
      }
    }
    const r = await runBash({
      command: job.prompt,
      timeoutMs: job.timeoutMs ?? 0,
      clock,
      env: {
        ...ctx.env,
        SVC_CRON_JOB: job.name,
        SVC_CRON_SCHEDULED_MINUTE: iso(entry.scheduledMinute),
      },
      cwd: ctx.env.HOME ?? ctx.paths.home,
      signal,
    });
    const tail = r.outputTail === '' ? null : r.outputTail;
    if (r.spawnError) return { outcome: 'failed', exitCode: null, outputTail: tail, detail: r.spawnError };
    if (r.aborted) {
      return {
        outcome: 'interrupted',
        exitCode: r.exitCode,
        outputTail: tail,
        detail: 'killed: svcd stopped',
      };
    }
    if (r.timedOut) {
      return {
        outcome: 'timeout',
        exitCode: r.exitCode,
        outputTail: tail,
        detail: `killed after the timeout of ${Math.round((job.timeoutMs ?? 0) / 1000)} s`,
      };
    }
    if (r.exitCode === 0) return { outcome: 'ok', exitCode: 0, outputTail: tail, detail: null };
    return {
      outcome: 'failed',
      exitCode: r.exitCode,
      outputTail: tail,
      detail: r.signal ? `bash ended by ${r.signal}` : `exit code ${r.exitCode}`,
    };
  }

  /** Queues an outcome; outcomes that finish together are written in one transaction. */
  function record(job: string, finish: store.Finish, event: CronFireEventPayload): Promise<void> {
    finished.push({ job, finish, event });
    flushing ??= (async () => {
      while (finished.length > 0) {
        const batch = finished;
        finished = [];
        const trimJobs = batch.filter((b) => trimDue(b.job)).map((b) => b.job);
        try {
          await store.finish(db, batch, trimJobs);
        } catch (e) {
          log.error({ err: e, fires: batch.length }, 'could not record cron outcomes');
        }
        for (const b of batch) await publish(b.event);
      }
      flushing = null;
    })();
    return flushing;
  }

  /**
   * Whether a job's history should be cut back to the newest 100 now: at its first entry
   * after start, then every TRIM_EVERY entries. Reads use LIMIT 100, so the few extra rows in
   * between never show, and a tick of 1 000 fires does not pay 1 000 deletes.
   */
  function trimDue(job: string): boolean {
    const n = sinceTrim.get(job);
    if (n === undefined || n + 1 >= TRIM_EVERY) {
      sinceTrim.set(job, 0);
      return true;
    }
    sinceTrim.set(job, n + 1);
    return false;
  }

  async function publish(payload: CronFireEventPayload): Promise<void> {
    try {
      await ctx.events.publish({ type: 'matrix', payload: { ...payload } });
    } catch (e) {
      log.warn({ err: e, job: payload.job }, 'could not publish the cron event');
    }
  }

  function eventOf(
    entry: Entry,
    r: { outcome: CronFireEventPayload['outcome']; exitCode: number | null; durationMs: number | null },
  ): CronFireEventPayload {
    return {
      kind: 'cron.fire',
      node_id: ctx.identity.node_id,
      job: entry.job,
      scheduled_minute: iso(entry.scheduledMinute),
      dispatch: entry.dispatch,
      outcome: r.outcome,
      reason: entry.reason,
      catch_up: entry.catchUp,
      exit_code: r.exitCode,
      duration_ms: r.durationMs,
    };
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
        await flushing;
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
      while (running.size > 0 || flushing) {
        await Promise.all([...running.values()].map((r) => r.done));
        await flushing;
      }
    },
  };
  registerCronMethods(ctx.mgmt, cron, () => clock.now());
  return cron;
}

function missedText(m: { first: number; last: number; count: number | null }): string {
  if (m.first === m.last) return iso(m.first);
  const n = m.count === null ? 'scheduled minutes' : `${m.count} scheduled minutes`;
  return `${n} from ${iso(m.first)} to ${iso(m.last)}`;
}

/** The stand-in for `signal` until the supervisor is wired in: every signal job fails clearly. */
export async function signalUnavailable(target: string): Promise<never> {
  throw new SvcError(
    'agent_not_found',
    `no agent "${target}" to signal: this svcd has no agent supervisor yet, so signal jobs cannot run`,
  );
}
