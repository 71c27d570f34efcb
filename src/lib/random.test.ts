import { describe, expect, it } from 'vitest';
import { randomBytes } from './random.js';

describe('randomBytes', () => {
  it('returns fresh buffers of the asked size, small and large', () => {
    for (const n of [0, 1, 4, 16, 32, 1023, 1025, 5000]) expect(randomBytes(n).length).toBe(n);
  });

  it('never hands out the same bytes twice, across pool refills', () => {
    const seen = new Set<string>();
    // 3 000 × 16 bytes: several refills of the 4 KiB pool.
    for (let i = 0; i < 3000; i++) seen.add(randomBytes(16).toString('hex'));
    expect(seen.size).toBe(3000);
  });

  it('returns buffers that later calls do not change', () => {
    const a = randomBytes(32);
    const copy = Buffer.from(a);
    for (let i = 0; i < 300; i++) randomBytes(32);
    expect(a.equals(copy)).toBe(true);
  });

  it('refuses a negative or fractional size', () => {
    expect(() => randomBytes(-1)).toThrow(RangeError);
    expect(() => randomBytes(1.5)).toThrow(RangeError);
  });
});
