// Building cron jobs for tests without writing TOML: the same compiled schedules the parser
// makes, with the parser's defaults.
import { type CronJob, DEFAULT_BASH_TIMEOUT_MS } from '../../src/daemon/cron/config.js';
import { cronSchedule, heartbeatSchedule } from '../../src/daemon/cron/schedule.js';
import { ceilToMinutes, parseDuration } from '../../src/lib/duration.js';

export interface JobSpec extends Partial<Omit<CronJob, 'schedule'>> {
  name: string;
  /** A 5-field expression, or use `every` for a heartbeat. */
  cron?: string;
  every?: string;
  tz?: string;
}

export function job(spec: JobSpec): CronJob {
  const { cron, every, tz, ...rest } = spec;
  if ((cron === undefined) === (every === undefined)) throw new Error('give cron or every');
  const schedule =
    cron !== undefined
      ? cronSchedule(cron, tz ?? 'UTC')
      : heartbeatSchedule(ceilToMinutes(parseDuration(every ?? '', { allowMs: false })));
  const dispatch = rest.dispatch ?? 'signal';
  return {
    line: 1,
    scheduleText: cron ?? null,
    intervalText: every ?? null,
    session: dispatch === 'signal' ? 'agent-1' : null,
    prompt: 'hello',
    enabled: true,
    catchUp: 'none',
    timeoutMs: dispatch === 'bash' ? DEFAULT_BASH_TIMEOUT_MS : null,
    ...rest,
    dispatch,
    schedule,
  };
}

/** Milliseconds of an ISO UTC time: at('2025-03-30T01:00Z'). */
export function at(isoText: string): number {
  const t = Date.parse(isoText);
  if (Number.isNaN(t)) throw new Error(`bad time ${isoText}`);
  return t;
}

export const MIN = 60_000;
