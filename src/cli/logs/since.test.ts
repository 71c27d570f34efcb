import { describe, expect, it } from 'vitest';
import { parseLines, parseSince } from './since.js';

const NOW = Date.UTC(2026, 4, 3, 12, 0, 0);

describe('parseSince', () => {
  it('reads a duration back from now', () => {
    expect(parseSince('10m', NOW)).toBe(NOW - 600_000);
    expect(parseSince('1h30m', NOW)).toBe(NOW - 5_400_000);
    expect(parseSince('2d', NOW)).toBe(NOW - 2 * 86_400_000);
  });

  it('reads a time with a zone as that instant', () => {
    expect(parseSince('2026-05-03T10:00:00Z', NOW)).toBe(Date.UTC(2026, 4, 3, 10));
    expect(parseSince('2026-05-03T10:00:00.5Z', NOW)).toBe(Date.UTC(2026, 4, 3, 10, 0, 0, 500));
    expect(parseSince('2026-05-03 12:00+02:00', NOW)).toBe(Date.UTC(2026, 4, 3, 10));
    expect(parseSince('2026-05-03T08:00-02:00', NOW)).toBe(Date.UTC(2026, 4, 3, 10));
  });

  it('reads a time without a zone as local time', () => {
    expect(parseSince('2026-05-03', NOW)).toBe(new Date(2026, 4, 3).getTime());
    expect(parseSince('2026-05-03 17:30', NOW)).toBe(new Date(2026, 4, 3, 17, 30).getTime());
    expect(parseSince('2026-05-03T17:30:05', NOW)).toBe(new Date(2026, 4, 3, 17, 30, 5).getTime());
  });

  it('refuses what it cannot read, naming the accepted forms', () => {
    for (const bad of [
      'yesterday',
      '10',
      '-1h',
      '2026-02-30',
      '2026-05-03 25:00',
      '2026-05-03T10:00Zulu',
      '',
    ])
      expect(() => parseSince(bad, NOW), bad).toThrow(/a duration back from now .* or a time/);
  });
});

describe('parseLines', () => {
  it('takes a count or all', () => {
    expect(parseLines('0')).toBe(0);
    expect(parseLines('25')).toBe(25);
    expect(parseLines('all')).toBe(Number.POSITIVE_INFINITY);
    expect(() => parseLines('-3')).toThrow(/invalid --lines/);
    expect(() => parseLines('ten')).toThrow(/invalid --lines/);
  });
});
