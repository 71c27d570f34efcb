import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { compareKeys, EventRing, formatEventKey, parseEventKey } from './ring.js';

function ringOf(ids: string[], capacity: number): EventRing<string> {
  const r = new EventRing<string>(capacity);
  for (const id of ids) r.push({ key: parseEventKey(id)!, id, value: id });
  return r;
}
const ids = (plan: { entries: { id: string }[] }) => plan.entries.map((e) => e.id);

describe('event keys', () => {
  it('parses tower ids and local ids and refuses anything else', () => {
    expect(parseEventKey('1234')).toEqual({ tower: 1234n, local: 0 });
    expect(parseEventKey('1234.2')).toEqual({ tower: 1234n, local: 2 });
    for (const bad of ['', 'x', '1.', '.1', '1.2.3', '-1', '12345678901234567890', '1 ']) {
      expect(parseEventKey(bad)).toBeNull();
    }
  });

  it('orders a tower event before the local events that follow it', () => {
    const sorted = ['3', '2.1', '2', '10', '2.10', '2.2'].map((i) => parseEventKey(i)!).sort(compareKeys);
    expect(sorted.map(formatEventKey)).toEqual(['2', '2.1', '2.2', '2.10', '3', '10']);
  });
});

describe('EventRing', () => {
  it('replays everything after an id still in the buffer, in order', () => {
    const r = ringOf(['5', '5.1', '7', '9'], 10);
    expect(ids(r.resume(parseEventKey('5.1'), '5.1'))).toEqual(['7', '9']);
    expect(r.resume(parseEventKey('5.1'), '5.1').reset).toBeNull();
    expect(ids(r.resume(parseEventKey('9'), '9'))).toEqual([]);
  });

  it('gives a new consumer (no id) live events only', () => {
    const r = ringOf(['1', '2'], 10);
    expect(r.resume(null, null)).toEqual({ entries: [], reset: null });
  });

  it('resets a consumer whose id is older than the buffer, then replays all of it', () => {
    const r = ringOf(['1', '2', '3', '4', '5'], 3);
    const plan = r.resume(parseEventKey('1'), '1');
    expect(plan.reset).toEqual({ reason: 'buffer', last_event_id: '1', resume_after: '2' });
    expect(ids(plan)).toEqual(['3', '4', '5']);
  });

  it('continues without a reset from the newest evicted id onward, even ids it never held', () => {
    const r = ringOf(['10', '20', '30', '40'], 2);
    expect(r.resume(parseEventKey('20'), '20').reset).toBeNull();
    expect(ids(r.resume(parseEventKey('25'), '25'))).toEqual(['30', '40']);
  });

  it('resets an id it never saw before anything was evicted (from before this svcd started)', () => {
    const r = ringOf(['10', '11'], 5);
    const plan = r.resume(parseEventKey('8'), '8');
    expect(plan.reset).toEqual({ reason: 'buffer', last_event_id: '8', resume_after: '9' });
    expect(ids(plan)).toEqual(['10', '11']);
    expect(new EventRing<string>(3).resume(parseEventKey('4'), '4').reset?.resume_after).toBe('0');
  });

  it('continues after the position of a previous run: later ids resume, earlier ones reset', () => {
    const r = new EventRing<string>(4);
    r.continueAfter(parseEventKey('50.2')!);
    expect(r.resume(parseEventKey('50.2'), '50.2')).toEqual({ entries: [], reset: null });
    r.push({ key: parseEventKey('51')!, id: '51', value: '51' });
    expect(ids(r.resume(parseEventKey('50.2'), '50.2'))).toEqual(['51']);
    expect(r.resume(parseEventKey('50.1'), '50.1').reset?.resume_after).toBe('50.2');
    expect(() => r.push({ key: parseEventKey('50.2')!, id: '50.2', value: 'x' })).toThrow(/increase/);
  });

  it('forgets everything on clear(), so old ids reset and lower ids may follow', () => {
    const r = ringOf(['7', '8'], 4);
    r.clear();
    expect(r.size).toBe(0);
    expect(r.resume(parseEventKey('8'), '8').reset).not.toBeNull();
    r.push({ key: parseEventKey('2')!, id: '2', value: '2' });
    expect(ids(r.resume(parseEventKey('1'), '1'))).toEqual(['2']);
  });

  it('refuses keys that do not increase', () => {
    const r = ringOf(['3'], 4);
    expect(() => r.push({ key: parseEventKey('2')!, id: '2', value: '2' })).toThrow(/increase/);
  });

  it('never skips or repeats: a resume from any held id yields exactly the later ids (property)', () => {
    fc.assert(
      fc.property(
        fc.uniqueArray(fc.integer({ min: 1, max: 10_000 }), { minLength: 1, maxLength: 200 }),
        fc.integer({ min: 1, max: 64 }),
        fc.nat(),
        (raw, capacity, pick) => {
          const all = [...raw].sort((a, b) => a - b).map(String);
          const r = ringOf(all, capacity);
          const kept = all.slice(-capacity);
          const from = kept[pick % kept.length] as string;
          const plan = r.resume(parseEventKey(from), from);
          expect(plan.reset).toBeNull();
          expect(ids(plan)).toEqual(kept.slice(kept.indexOf(from) + 1));
        },
      ),
    );
  });
});
