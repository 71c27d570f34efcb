import { Cron } from 'croner';
import { describe, expect, it } from 'vitest';
import { at, MIN } from '../../../test/support/cron.js';
import { cronSchedule, formatLocal, minuteOf } from './schedule.js';

describe('cronSchedule', () => {
  // firesAt takes a fixed-offset shortcut away from DST transitions; around them it must
  // agree minute for minute with croner's zoned search, which is the definition.
  const cases: [string, string, string][] = [
    ['Europe/Berlin', '2025-03-29T22:00Z', '2025-03-30T05:00Z'],
    ['Europe/Berlin', '2025-10-25T22:00Z', '2025-10-26T05:00Z'],
    ['America/New_York', '2025-11-02T03:00Z', '2025-11-02T10:00Z'],
    ['Australia/Lord_Howe', '2025-04-05T12:00Z', '2025-04-05T18:00Z'], // 30-minute DST shift
    ['Asia/Kathmandu', '2025-06-01T00:00Z', '2025-06-01T03:00Z'], // +05:45, no DST
  ];
  const patterns = ['30 2 * * *', '*/20 * * * *', '15 1-3 * * *', '0 3 * * *', '45 * * * 0'];

  it.each(cases)("agrees with croner's zoned search in %s from %s to %s", (tz, from, to) => {
    for (const p of patterns) {
      const ours = cronSchedule(p, tz);
      const zoned = new Cron(p, { mode: '5-part', timezone: tz });
      const mine: number[] = [];
      const theirs: number[] = [];
      for (let m = at(from); m < at(to); m += MIN) if (ours.firesAt(m)) mine.push(m);
      for (
        let r = zoned.nextRun(new Date(at(from) - 1000));
        r && r.getTime() < at(to);
        r = zoned.nextRun(r)
      ) {
        theirs.push(r.getTime());
      }
      expect({ p, fires: mine.map((m) => new Date(m).toISOString()) }).toEqual({
        p,
        fires: theirs.map((m) => new Date(m).toISOString()),
      });
    }
  });

  it('finds the next and the latest scheduled minute around an instant', () => {
    const s = cronSchedule('0 */6 * * *', 'UTC');
    expect(s.nextAfter(at('2025-06-01T06:00Z'))).toBe(at('2025-06-01T12:00Z'));
    expect(s.nextAfter(at('2025-06-01T05:59:59Z'))).toBe(at('2025-06-01T06:00Z'));
    expect(s.latestBefore(at('2025-06-01T06:00Z'))).toBe(at('2025-06-01T00:00Z'));
    expect(s.latestBefore(at('2025-06-01T06:00:01Z'))).toBe(at('2025-06-01T06:00Z'));
  });

  it('rejects expressions with other than 5 fields', () => {
    expect(() => cronSchedule('* * * *')).toThrow(/exactly five, six, or seven/);
    expect(() => cronSchedule('0 * * * * *')).toThrow(/requires exactly 5 parts/);
  });
});

describe('formatLocal', () => {
  it('writes ISO 8601 in the zone with its offset on both sides of a DST change', () => {
    expect(formatLocal(at('2025-03-30T00:30Z'), 'Europe/Berlin')).toBe('2025-03-30T01:30:00+01:00');
    expect(formatLocal(at('2025-03-30T01:00Z'), 'Europe/Berlin')).toBe('2025-03-30T03:00:00+02:00');
    expect(formatLocal(at('2025-06-01T00:00Z'), 'UTC')).toBe('2025-06-01T00:00:00+00:00');
    expect(formatLocal(at('2025-06-01T00:00Z'), 'Asia/Kathmandu')).toBe('2025-06-01T05:45:00+05:45');
  });
});

describe('minuteOf', () => {
  it('floors to the start of the minute', () => {
    expect(minuteOf(at('2025-06-01T10:00:59.999Z'))).toBe(at('2025-06-01T10:00Z'));
    expect(minuteOf(at('2025-06-01T10:01Z'))).toBe(at('2025-06-01T10:01Z'));
  });
});
