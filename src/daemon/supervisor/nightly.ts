// Nightly restart times: the next occurrence of a local time of day, in the daemon's zone
// or a configured IANA zone. croner does the calendar work, DST included: a time that does
// not exist that night (spring forward) fires at the first valid minute after it, and a
// time that occurs twice (fall back) fires once.
import { Cron } from 'croner';
import type { TimeOfDay } from './config-section.js';

/** The first occurrence of `tod` strictly after `afterMs`. */
export function nextNightly(afterMs: number, tod: TimeOfDay, timezone: string | null): number {
  const cron = new Cron(`${tod.minute} ${tod.hour} * * *`, timezone ? { timezone } : {});
  const next = cron.nextRun(new Date(afterMs));
  if (!next) throw new Error(`no next run for ${formatTimeOfDay(tod)}`);
  return next.getTime();
}

export function formatTimeOfDay(tod: TimeOfDay): string {
  return `${String(tod.hour).padStart(2, '0')}:${String(tod.minute).padStart(2, '0')}`;
}
