import { describe, expect, it } from 'vitest';
import { ago, bytes, duration } from './format.js';

describe('console formats', () => {
  const now = Date.parse('2026-11-27T12:00:00Z');
  it('writes relative times', () => {
    expect(ago('2026-11-27T12:00:00Z', now)).toBe('just now');
    expect(ago('2026-11-27T11:59:18Z', now)).toBe('42 s ago');
    expect(ago('2026-11-27T11:57:00Z', now)).toBe('3 min ago');
    expect(ago('2026-11-27T09:30:00Z', now)).toBe('2 h ago');
    expect(ago('2026-11-22T12:00:00Z', now)).toBe('5 d ago');
    expect(ago('2026-11-27T12:03:00Z', now)).toBe('in 3 min');
    expect(ago('nonsense', now)).toBe('—');
  });
  it('writes durations and sizes', () => {
    expect(duration(850)).toBe('850 ms');
    expect(duration(12_345)).toBe('12.3 s');
    expect(duration(245_000)).toBe('4 min 5 s');
    expect(duration(7_380_000)).toBe('2 h 3 min');
    expect(bytes(512)).toBe('512 B');
    expect(bytes(1536)).toBe('1.5 KiB');
    expect(bytes(12 * 1024 * 1024)).toBe('12.0 MiB');
  });
});
