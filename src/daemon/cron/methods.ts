// cron.list|describe|history|reload|gc on mgmt.sock: views of the running config and of
// state.db in the shapes of src/protocol/cron.ts, as a table daemon.ts registers. No
// decisions here.
import { iso } from '../../lib/clock.js';
import { Empty } from '../../protocol/common.js';
import {
  CRON_HISTORY_MAX,
  type CronDescribe,
  type CronFire,
  type CronHistory,
  CronHistoryParams,
  CronJobName,
  type CronJobView,
  type CronList,
} from '../../protocol/cron.js';
import { SvcError } from '../../protocol/errors.js';
import { type MgmtMethod, method } from '../mgmt/method.js';
import type { CronJob } from './config.js';
import type { Cron, CronState } from './cron.js';
import { formatLocal, hostTimezone, MINUTE_MS, minuteOf } from './schedule.js';

/** Now, as the cron component sees it (its injected clock). */
type Now = () => number;

export function cronMethods(cron: Cron, now: Now): MgmtMethod[] {
  return [
    method(
      'cron.list',
      async (): Promise<CronList> => {
        const st = cron.state();
        const last = await cron.lastFires();
        const tz = timezoneOf(st);
        return {
          file: st.config.file,
          timezone: tz,
          config_error: st.configError,
          state_error: st.stateFault
            ? `${st.stateFault.file} cannot be written since ${st.stateFault.since} (${st.stateFault.detail}); ${st.stateFault.skipped_fires} fires skipped`
            : null,
          last_tick: st.tickedMinute === null ? null : iso(st.tickedMinute),
          jobs: st.config.jobs.map((j) => viewOf(j, st, last.get(j.name) ?? null, tz, now())),
        };
      },
      Empty,
    ),

    method(
      'cron.describe',
      async (params): Promise<CronDescribe> => {
        const { name } = params as CronJobName;
        const st = cron.state();
        const job = jobNamed(st, name);
        const [last] = await cron.history(name, 1);
        const tz = timezoneOf(st);
        return {
          ...viewOf(job, st, last ?? null, tz, now()),
          timezone: tz,
          missed_minutes:
            job.catchUp === 'latest'
              ? 'After svcd was down, the most recent missed minute runs once when svcd starts again, unless the job is due in that minute anyway; earlier missed minutes are not run (catch_up = "latest").'
              : 'Minutes missed while svcd is down are not caught up: after a restart the job next runs at its next scheduled minute (catch_up = "none"; set catch_up = "latest" to run the most recent missed minute once).',
        };
      },
      CronJobName,
    ),

    method(
      'cron.history',
      async (params): Promise<CronHistory> => {
        const p = params as CronHistoryParams;
        const items = await cron.history(p.name, p.limit ?? CRON_HISTORY_MAX);
        // A job removed from cron.toml keeps its history; an unknown name with none is an error.
        if (items.length === 0) jobNamed(cron.state(), p.name);
        return { job: p.name, items };
      },
      CronHistoryParams,
    ),

    method('cron.reload', () => cron.reload(), Empty),
    method('cron.gc', () => cron.gc(), Empty),
  ];
}

function jobNamed(st: CronState, name: string): CronJob {
  const job = st.config.jobs.find((j) => j.name === name);
  if (!job) {
    throw new SvcError(
      'not_found',
      `no cron job "${name}" in ${st.config.file}; "svc agent cron list" shows the jobs`,
    );
  }
  return job;
}

function timezoneOf(st: CronState): string {
  return st.config.timezone ?? hostTimezone();
}

/** The next minute the job fires, as this process will tick it. */
export function nextFire(job: CronJob, st: CronState, now: number): number | null {
  if (!job.enabled) return null;
  // The first minute this process has not ticked yet.
  const open =
    st.tickedMinute !== null && st.tickedMinute >= minuteOf(now) ? minuteOf(now) + MINUTE_MS : minuteOf(now);
  const s = job.schedule;
  if (s.kind === 'schedule') return s.firesAt(open) ? open : s.nextAfter(open);
  const last = st.heartbeats.get(job.name);
  return last === undefined ? open : Math.max(last + s.intervalMs, open);
}

function viewOf(job: CronJob, st: CronState, last: CronFire | null, tz: string, now: number): CronJobView {
  const next = nextFire(job, st, now);
  const s = job.schedule;
  return {
    name: job.name,
    kind: s.kind,
    schedule: job.scheduleText,
    interval: job.intervalText,
    interval_ms: s.kind === 'heartbeat' ? s.intervalMs : null,
    session: job.session,
    prompt: job.prompt,
    dispatch: job.dispatch,
    enabled: job.enabled,
    catch_up: job.catchUp,
    timeout_ms: job.timeoutMs,
    line: job.line,
    next_fire: next === null ? null : iso(next),
    next_fire_local: next === null ? null : formatLocal(next, tz),
    running: st.running.has(job.name),
    last_fire: last,
  };
}
