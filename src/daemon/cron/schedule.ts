// When a job's minutes are: 5-field cron expressions through croner (in the configured IANA
// zone or the host's local time, DST handled by croner) and heartbeat intervals in whole
// minutes. Pure apart from a memo of the last lookup; knows nothing of ticks or storage.
import { Cron } from 'croner';

export const MINUTE_MS = 60_000;

/** The start of the minute `ms` falls in. */
export function minuteOf(ms: number): number {
  return Math.floor(ms / MINUTE_MS) * MINUTE_MS;
}

export interface CronSchedule {
  readonly kind: 'schedule';
  readonly expr: string;
  /** IANA zone, or undefined for the host's local time. */
  readonly timezone: string | undefined;
  /** True when `minute` (a minute start, ms) is one of the schedule's minutes. */
  firesAt(minute: number): boolean;
  /** The first scheduled minute strictly after `ms`, or null if none ever. */
  nextAfter(ms: number): number | null;
  /** The last scheduled minute strictly before `ms`, or null. */
  latestBefore(ms: number): number | null;
}

export interface HeartbeatSchedule {
  readonly kind: 'heartbeat';
  /** Rounded up to whole minutes. */
  readonly intervalMs: number;
}

export type Schedule = CronSchedule | HeartbeatSchedule;

/**
 * Compiles a 5-field expression; throws an Error with croner's reason when it is invalid or
 * never fires. The timezone must already be valid (see checkTimezone).
 */
export function cronSchedule(expr: string, timezone?: string): CronSchedule {
  const zoned = new Cron(expr, { mode: '5-part', ...(timezone ? { timezone } : {}) });
  const offsetAt = timezone ? zoneOffset(timezone) : localOffset;
  // Away from DST transitions a zone is a fixed UTC offset, and croner's match() on a
  // fixed-offset pattern costs a few µs where a zoned nextRun() costs a hundred: that is what
  // keeps a tick of 1 000 jobs cheap. Within 3 h after a transition (gap or repeated hour)
  // the zoned search decides, so croner's DST rules hold exactly.
  const fixed = new Map<number, Cron>();
  const fixedAt = (offset: number) => {
    let c = fixed.get(offset);
    if (!c) {
      c = new Cron(expr, { mode: '5-part', utcOffset: offset });
      fixed.set(offset, c);
    }
    return c;
  };
  // Memo of the last forward lookup: no scheduled minute in (after, next), one at next.
  let memo: { after: number; next: number | null } | null = null;
  const lookup = (after: number): number | null => {
    if (memo && memo.after <= after && (memo.next === null || after < memo.next)) return memo.next;
    // croner works in whole seconds and returns runs strictly after its reference.
    const next = zoned.nextRun(new Date(after))?.getTime() ?? null;
    memo = { after, next };
    return next;
  };
  const schedule: CronSchedule = {
    kind: 'schedule',
    expr,
    timezone,
    firesAt(minute) {
      const offset = offsetAt(minute);
      if (offset === offsetAt(minute - TRANSITION_SHADOW_MS)) return fixedAt(offset).match(new Date(minute));
      return lookup(minute - 1000) === minute;
    },
    nextAfter: (ms) => lookup(ms),
    latestBefore(ms) {
      const prev = zoned.previousRuns(1, new Date(ms - 1))[0];
      return prev ? prev.getTime() : null;
    },
  };
  if (schedule.nextAfter(Date.UTC(2000, 0, 1)) === null) {
    throw new Error(`"${expr}" never fires`);
  }
  return schedule;
}

/** Longer than any DST shift (1 h; 30 min on Lord Howe), so a repeated hour is inside it. */
const TRANSITION_SHADOW_MS = 3 * 60 * 60_000;

/** The host's UTC offset in minutes (east positive) at `ms`. */
function localOffset(ms: number): number {
  return -new Date(ms).getTimezoneOffset();
}

const zoneOffsets = new Map<string, (ms: number) => number>();

/**
 * The UTC offset of an IANA zone in minutes at `ms`. Intl lookups cost ~10 µs, so each hour
 * is checked once: when its start and its end have the same offset the whole hour has it (no
 * zone changes offset twice within an hour); an hour with a transition is looked up per minute.
 */
function zoneOffset(tz: string): (ms: number) => number {
  const known = zoneOffsets.get(tz);
  if (known) return known;
  const fmt = new Intl.DateTimeFormat('en-US', { timeZone: tz, timeZoneName: 'longOffset' });
  const exact = (ms: number): number => {
    const name = fmt.formatToParts(new Date(ms)).find((p) => p.type === 'timeZoneName')?.value ?? 'GMT';
    const m = /^GMT([+-])(\d{2}):(\d{2})$/.exec(name);
    return m ? (m[1] === '-' ? -1 : 1) * (Number(m[2]) * 60 + Number(m[3])) : 0;
  };
  const hours = new Map<number, number | null>();
  const offsetAt = (ms: number): number => {
    const hour = Math.floor(ms / HOUR_MS) * HOUR_MS;
    let steady = hours.get(hour);
    if (steady === undefined) {
      const first = exact(hour);
      steady = first === exact(hour + HOUR_MS) ? first : null;
      hours.set(hour, steady);
      if (hours.size > 256) hours.delete(hours.keys().next().value ?? hour);
    }
    return steady ?? exact(minuteOf(ms));
  };
  zoneOffsets.set(tz, offsetAt);
  return offsetAt;
}

const HOUR_MS = 60 * 60_000;

export function heartbeatSchedule(intervalMs: number): HeartbeatSchedule {
  return { kind: 'heartbeat', intervalMs };
}

/** Throws unless `tz` is an IANA zone name this Node.js knows. */
export function checkTimezone(tz: string): void {
  try {
    new Intl.DateTimeFormat('en-US', { timeZone: tz });
  } catch {
    throw new Error(`unknown time zone "${tz}": use an IANA name such as "Europe/Berlin" or "UTC"`);
  }
}

/** The IANA zone local time means for this process (TZ, else the system's). */
export function hostTimezone(): string {
  return Intl.DateTimeFormat().resolvedOptions().timeZone;
}

const localParts = new Map<string, Intl.DateTimeFormat>();

/** `ms` as ISO 8601 in `tz` with its UTC offset, e.g. 2025-03-30T03:00:00+02:00. */
export function formatLocal(ms: number, tz: string): string {
  let fmt = localParts.get(tz);
  if (!fmt) {
    fmt = new Intl.DateTimeFormat('en-US', {
      timeZone: tz,
      hourCycle: 'h23',
      year: 'numeric',
      month: '2-digit',
      day: '2-digit',
      hour: '2-digit',
      minute: '2-digit',
      second: '2-digit',
      timeZoneName: 'longOffset',
    });
    localParts.set(tz, fmt);
  }
  const p: Record<string, string> = {};
  for (const part of fmt.formatToParts(new Date(ms))) p[part.type] = part.value;
  const offset = (p.timeZoneName ?? 'GMT').replace('GMT', '') || '+00:00';
  return `${p.year}-${p.month}-${p.day}T${p.hour}:${p.minute}:${p.second}${offset}`;
}
