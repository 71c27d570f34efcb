// The oracle of the cron properties: random schedules and random up/down timelines, and the
// minutes each job must fire at, computed with its own field matcher (UTC, Vixie day rule)
// instead of croner, so the property tests more than croner agreeing with itself.
import fc from 'fast-check';
import { at, type JobSpec, MIN } from './cron.js';

type Field = { kind: 'any' } | { kind: 'step'; n: number } | { kind: 'list'; values: number[] };

export interface Spec {
  minute: Field;
  hour: Field;
  dom: Field;
  month: Field;
  dow: Field;
}

const list = (min: number, max: number): fc.Arbitrary<Field> =>
  fc
    .uniqueArray(fc.integer({ min, max }), { minLength: 1, maxLength: 4 })
    .map<Field>((v) => ({ kind: 'list', values: v.sort((a, b) => a - b) }));
const field = (min: number, max: number): fc.Arbitrary<Field> =>
  fc.oneof(
    fc.constant<Field>({ kind: 'any' }),
    fc.integer({ min: 2, max: Math.min(30, max) }).map<Field>((n) => ({ kind: 'step', n })),
    list(min, max),
  );

export const specArb: fc.Arbitrary<Spec> = fc.record({
  minute: field(0, 59),
  hour: field(0, 23),
  // Day fields without steps: whether "*/n" counts as restricted for the dom-OR-dow rule
  // differs between cron implementations, and that is not what these properties are about.
  dom: fc.oneof(
    { weight: 3, arbitrary: fc.constant<Field>({ kind: 'any' }) },
    { weight: 1, arbitrary: list(1, 28) },
  ),
  month: fc.constant<Field>({ kind: 'any' }),
  dow: fc.oneof(
    { weight: 3, arbitrary: fc.constant<Field>({ kind: 'any' }) },
    { weight: 1, arbitrary: list(0, 6) },
  ),
});

function text(f: Field): string {
  return f.kind === 'any' ? '*' : f.kind === 'step' ? `*/${f.n}` : f.values.join(',');
}
export const exprOf = (s: Spec) => [s.minute, s.hour, s.dom, s.month, s.dow].map(text).join(' ');

function fieldMatches(f: Field, v: number, base: number): boolean {
  if (f.kind === 'any') return true;
  if (f.kind === 'step') return (v - base) % f.n === 0;
  return f.values.includes(v);
}

/** Vixie semantics in UTC: the day matches on dom OR dow when both are restricted. */
export function matches(s: Spec, ms: number): boolean {
  const d = new Date(ms);
  const dom = fieldMatches(s.dom, d.getUTCDate(), 1);
  const dow = fieldMatches(s.dow, d.getUTCDay(), 0);
  const day = s.dom.kind !== 'any' && s.dow.kind !== 'any' ? dom || dow : dom && dow;
  return (
    fieldMatches(s.minute, d.getUTCMinutes(), 0) &&
    fieldMatches(s.hour, d.getUTCHours(), 0) &&
    fieldMatches(s.month, d.getUTCMonth() + 1, 1) &&
    day
  );
}

export interface JobArb {
  sched: { spec: Spec } | { everyMin: number };
  catchUp: boolean;
}

export const jobArb: fc.Arbitrary<JobArb> = fc.record({
  sched: fc.oneof(
    { weight: 3, arbitrary: specArb.map((spec) => ({ spec })) },
    { weight: 1, arbitrary: fc.integer({ min: 1, max: 600 }).map((everyMin) => ({ everyMin })) },
  ),
  catchUp: fc.boolean(),
});

/** The jobs as test specs (names j0, j1, …), schedules in UTC. */
export function jobsOf(arbs: JobArb[]): JobSpec[] {
  return arbs.map((a, i) => ({
    name: `j${i}`,
    ...('spec' in a.sched ? { cron: exprOf(a.sched.spec) } : { every: `${a.sched.everyMin}m` }),
    catchUp: a.catchUp ? 'latest' : 'none',
  }));
}

export const T0 = at('2025-06-02T00:00Z');

export interface Uptime {
  start: number;
  stop: number;
  /** How this run ends: a graceful stop, or kill -9. */
  crash: boolean;
}

/**
 * Up intervals [start, stop) within `horizon` ms from T0, at half-second offsets so none sits
 * on a minute boundary. Downtimes are often a few seconds (a restart inside the minute,
 * where the dedup keys matter) and sometimes long (missed minutes, catch-up).
 */
export function uptimeArb(horizon: number, maxRuns: number): fc.Arbitrary<Uptime[]> {
  const run = fc.record({
    up: fc.oneof(fc.integer({ min: 1, max: 59 }), fc.integer({ min: 60, max: horizon / 4000 })),
    down: fc.oneof(fc.integer({ min: 1, max: 30 }), fc.integer({ min: 31, max: horizon / 4000 })),
    crash: fc.boolean(),
  });
  return fc
    .tuple(fc.integer({ min: 0, max: 59 }), fc.array(run, { minLength: 1, maxLength: maxRuns }))
    .map(([offset, runs]) => {
      const ups: Uptime[] = [];
      let t = T0 + offset * 1000 + 500;
      for (const r of runs) {
        const stop = Math.min(t + r.up * 1000, T0 + horizon + 500);
        ups.push({ start: t, stop, crash: r.crash });
        t = stop + r.down * 1000;
        if (t >= T0 + horizon) break;
      }
      return ups;
    });
}

const minuteOf = (ms: number) => Math.floor(ms / MIN) * MIN;

/** "j0@2025-06-02T10:00:00.000Z" for every fire the timeline must produce, sorted. */
export function expectedFires(arbs: JobArb[], ups: Uptime[]): string[] {
  const upMinutes: number[] = [];
  const starts: { minute: number; prev: number | null }[] = [];
  let prevUp: number | null = null;
  for (const { start, stop } of ups) {
    starts.push({ minute: minuteOf(start), prev: prevUp });
    for (let m = minuteOf(start); m < stop; m += MIN) if (upMinutes.at(-1) !== m) upMinutes.push(m);
    prevUp = minuteOf(stop - 1);
  }
  const expected: string[] = [];
  arbs.forEach((a, i) => {
    const sched = a.sched;
    let isSlot: (m: number) => boolean;
    if ('spec' in sched) {
      isSlot = (m) => matches(sched.spec, m);
    } else {
      // A heartbeat's first beat is the first minute svcd is up; the grid holds from there.
      const every = sched.everyMin * MIN;
      const anchor = upMinutes[0] ?? 0;
      isSlot = (m) => m >= anchor && (m - anchor) % every === 0;
    }
    const slots = new Set<number>();
    for (const m of upMinutes) if (isSlot(m)) slots.add(m);
    if (a.catchUp) {
      // After each downtime: the most recent missed slot, unless the start minute is a slot.
      for (const { minute, prev } of starts) {
        if (prev === null || minute - prev <= MIN || isSlot(minute)) continue;
        for (let m = minute - MIN; m > prev; m -= MIN) {
          if (isSlot(m)) {
            slots.add(m);
            break;
          }
        }
      }
    }
    for (const m of slots) expected.push(`j${i}@${new Date(m).toISOString()}`);
  });
  return expected.sort();
}
