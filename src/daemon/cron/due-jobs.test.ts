import fc from 'fast-check';
import { afterEach, describe, expect, it } from 'vitest';
import { at, job, MIN } from '../../../test/support/cron.js';
import { expectedFires, jobArb, jobsOf, uptimeArb } from '../../../test/support/cron-oracle.js';
import type { CronJob } from './config.js';
import { type Decision, dueJobs, heartbeatSlots } from './due-jobs.js';
import { cronSchedule, minuteOf } from './schedule.js';

const NONE = new Set<string>();

/** Ticks every minute in [from, to) with svcd up throughout; the minutes each job fires. */
function firesOver(jobs: CronJob[], from: string, to: string): Record<string, string[]> {
  const out: Record<string, string[]> = Object.fromEntries(jobs.map((j) => [j.name, []]));
  const heartbeats = new Map<string, number>();
  for (let m = at(from), last: number | null = null; m < at(to); last = m, m += MIN) {
    const ds = dueJobs({ jobs, minute: m, lastTick: last, heartbeats, running: NONE });
    for (const d of ds) if (d.action === 'fire') out[d.job.name]?.push(new Date(d.minute).toISOString());
    for (const [k, v] of heartbeatSlots(ds)) heartbeats.set(k, v);
  }
  return out;
}

function brief(ds: Decision[]) {
  return ds.map((d) =>
    d.action === 'fire'
      ? { fire: d.job.name, minute: new Date(d.minute).toISOString(), catchUp: d.missed !== null }
      : { skip: d.job.name, minute: new Date(d.minute).toISOString(), reason: d.reason },
  );
}

describe('dueJobs across calendar boundaries (UTC)', () => {
  it.each([
    [
      '*/15 * * * *',
      '2025-06-01T10:13Z',
      '2025-06-01T10:31Z',
      ['2025-06-01T10:15:00.000Z', '2025-06-01T10:30:00.000Z'],
    ],
    ['0 * * * *', '2025-06-01T10:58Z', '2025-06-01T11:02Z', ['2025-06-01T11:00:00.000Z']],
    ['59 23 * * *', '2025-06-01T23:57Z', '2025-06-02T00:02Z', ['2025-06-01T23:59:00.000Z']],
    ['0 0 * * *', '2025-06-01T23:58Z', '2025-06-02T00:02Z', ['2025-06-02T00:00:00.000Z']],
    ['0 0 1 * *', '2025-01-31T23:58Z', '2025-02-01T00:02Z', ['2025-02-01T00:00:00.000Z']],
    ['0 0 1 1 *', '2025-12-31T23:58Z', '2026-01-01T00:02Z', ['2026-01-01T00:00:00.000Z']],
    ['0 12 29 2 *', '2028-02-28T11:00Z', '2028-03-01T13:00Z', ['2028-02-29T12:00:00.000Z']],
    ['0 0 31 * *', '2025-04-29T00:00Z', '2025-05-02T00:00Z', []],
    [
      '30 9 * * 1-5',
      '2025-06-06T09:00Z',
      '2025-06-09T10:00Z',
      ['2025-06-06T09:30:00.000Z', '2025-06-09T09:30:00.000Z'],
    ],
  ])('"%s" from %s to %s fires at %j', (expr, from, to, want) => {
    expect(firesOver([job({ name: 'j', cron: expr })], from, to).j).toEqual(want);
  });

  it('reads schedules in the configured zone: 9:00 in Tokyo is 00:00 UTC', () => {
    const j = job({ name: 'j', cron: '0 9 * * *', tz: 'Asia/Tokyo' });
    expect(firesOver([j], '2025-06-01T23:00Z', '2025-06-02T02:00Z').j).toEqual(['2025-06-02T00:00:00.000Z']);
  });
});

describe('dueJobs on DST days', () => {
  const berlin = (name: string, cron: string) => job({ name, cron, tz: 'Europe/Berlin' });

  it('on the spring-forward day runs a job set inside the gap once, at 03:00 CEST', () => {
    // 2025-03-30 in Berlin: 02:00 CET jumps to 03:00 CEST (01:00 UTC); 02:xx does not exist.
    const fires = firesOver(
      [berlin('in-gap', '30 2 * * *'), berlin('at-3', '0 3 * * *'), berlin('half-hourly', '*/30 * * * *')],
      '2025-03-30T00:00Z',
      '2025-03-30T02:01Z',
    );
    expect(fires).toEqual({
      'in-gap': ['2025-03-30T01:00:00.000Z'],
      'at-3': ['2025-03-30T01:00:00.000Z'],
      // 01:00, 01:30 CET, then 03:00, 03:30, 04:00 CEST: no 02:00 or 02:30 that day.
      'half-hourly': [
        '2025-03-30T00:00:00.000Z',
        '2025-03-30T00:30:00.000Z',
        '2025-03-30T01:00:00.000Z',
        '2025-03-30T01:30:00.000Z',
        '2025-03-30T02:00:00.000Z',
      ],
    });
  });

  it('on the fall-back day runs a fixed-time job once and wildcard minutes on both passes', () => {
    // 2025-10-26 in Berlin: 03:00 CEST goes back to 02:00 CET (01:00 UTC); 02:xx happens twice.
    const fires = firesOver(
      [berlin('fixed', '30 2 * * *'), berlin('half-hourly', '*/30 2 * * *'), berlin('range', '15 1-3 * * *')],
      '2025-10-25T23:00Z',
      '2025-10-26T03:00Z',
    );
    expect(fires).toEqual({
      fixed: ['2025-10-26T00:30:00.000Z'],
      'half-hourly': [
        '2025-10-26T00:00:00.000Z',
        '2025-10-26T00:30:00.000Z',
        '2025-10-26T01:00:00.000Z',
        '2025-10-26T01:30:00.000Z',
      ],
      range: [
        '2025-10-25T23:15:00.000Z',
        '2025-10-26T00:15:00.000Z',
        '2025-10-26T01:15:00.000Z',
        '2025-10-26T02:15:00.000Z',
      ],
    });
  });

  it('follows New York across both of its 2025 transitions', () => {
    // 2025-03-09: 02:00 EST jumps to 03:00 EDT (07:00 UTC). 2025-11-02: 01:xx happens twice.
    const ny = (name: string, cron: string) => job({ name, cron, tz: 'America/New_York' });
    const jobs = [ny('at-2-30', '30 2 * * *'), ny('at-1-30', '30 1 * * *')];
    expect(firesOver(jobs, '2025-03-09T04:00Z', '2025-03-09T09:00Z')).toEqual({
      'at-2-30': ['2025-03-09T07:00:00.000Z'],
      'at-1-30': ['2025-03-09T06:30:00.000Z'],
    });
    expect(firesOver(jobs, '2025-11-02T04:00Z', '2025-11-02T09:00Z')).toEqual({
      'at-2-30': ['2025-11-02T07:30:00.000Z'],
      'at-1-30': ['2025-11-02T05:30:00.000Z'],
    });
  });

  describe('with TZ set and no timezone in cron.toml (host local time)', () => {
    const saved = process.env.TZ;
    afterEach(() => {
      if (saved === undefined) delete process.env.TZ;
      else process.env.TZ = saved;
    });

    it('fires exactly as with timezone = the same zone', () => {
      process.env.TZ = 'Europe/Berlin';
      // Guard: this process really switched zones (Node resets its zone cache on TZ writes).
      expect(new Date(at('2025-07-01T00:00Z')).getTimezoneOffset()).toBe(-120);
      const local = { ...job({ name: 'x', cron: '0 0 * * *' }), schedule: cronSchedule('30 2 * * *') };
      const explicit = job({ name: 'x', cron: '30 2 * * *', tz: 'Europe/Berlin' });
      for (const [from, to] of [
        ['2025-03-29T22:00Z', '2025-03-30T04:00Z'],
        ['2025-10-25T22:00Z', '2025-10-26T04:00Z'],
      ] as const) {
        expect(firesOver([local], from, to)).toEqual(firesOver([explicit], from, to));
      }
      expect(firesOver([local], '2025-03-29T22:00Z', '2025-03-30T04:00Z').x).toEqual([
        '2025-03-30T01:00:00.000Z',
      ]);
    });
  });
});

describe('dueJobs for heartbeats', () => {
  it('fires a new heartbeat at once, then every interval after its last slot', () => {
    const hb = job({ name: 'hb', every: '1h30m' });
    expect(firesOver([hb], '2025-06-01T10:00Z', '2025-06-01T14:31Z').hb).toEqual([
      '2025-06-01T10:00:00.000Z',
      '2025-06-01T11:30:00.000Z',
      '2025-06-01T13:00:00.000Z',
      '2025-06-01T14:30:00.000Z',
    ]);
  });

  it('rounds sub-minute intervals up: a 90s heartbeat fires every 2 minutes', () => {
    const hb = job({ name: 'hb', every: '90s' });
    expect(firesOver([hb], '2025-06-01T10:00Z', '2025-06-01T10:07Z').hb).toEqual([
      '2025-06-01T10:00:00.000Z',
      '2025-06-01T10:02:00.000Z',
      '2025-06-01T10:04:00.000Z',
      '2025-06-01T10:06:00.000Z',
    ]);
  });

  it('is not due again in the minute of its last slot (restart inside the minute)', () => {
    const hb = job({ name: 'hb', every: '5m' });
    const m = at('2025-06-01T10:00Z');
    const ds = dueJobs({
      jobs: [hb],
      minute: m,
      lastTick: m,
      heartbeats: new Map([['hb', m]]),
      running: NONE,
    });
    expect(ds).toEqual([]);
  });

  it('after downtime keeps its grid and skips the missed beats unless catch_up = "latest"', () => {
    const last = at('2025-06-01T10:00Z');
    const now = at('2025-06-01T11:07Z'); // down from 10:01; beats 10:30 and 11:00 missed
    const input = (j: CronJob) => ({
      jobs: [j],
      minute: now,
      lastTick: at('2025-06-01T10:01Z'),
      heartbeats: new Map([['hb', last]]),
      running: NONE,
    });
    const none = dueJobs(input(job({ name: 'hb', every: '30m' })));
    expect(brief(none)).toEqual([
      { skip: 'hb', minute: '2025-06-01T11:00:00.000Z', reason: 'missed_while_down' },
    ]);
    expect(none[0]?.missed).toEqual({
      first: at('2025-06-01T10:30Z'),
      last: at('2025-06-01T11:00Z'),
      count: 2,
    });
    expect(heartbeatSlots(none).get('hb')).toBe(at('2025-06-01T11:00Z'));
    const latest = dueJobs(input(job({ name: 'hb', every: '30m', catchUp: 'latest' })));
    expect(brief(latest)).toEqual([{ fire: 'hb', minute: '2025-06-01T11:00:00.000Z', catchUp: true }]);
  });
});

describe('dueJobs skips', () => {
  const m = at('2025-06-01T10:00Z');
  const base = { minute: m, lastTick: m - MIN, heartbeats: new Map<string, number>() };

  it('records a disabled job and a job whose previous fire still runs as skipped', () => {
    const ds = dueJobs({
      ...base,
      jobs: [
        job({ name: 'off', cron: '* * * * *', enabled: false }),
        job({ name: 'busy', cron: '* * * * *' }),
        job({ name: 'free', cron: '* * * * *' }),
      ],
      running: new Set(['busy']),
    });
    expect(brief(ds)).toEqual([
      { skip: 'off', minute: '2025-06-01T10:00:00.000Z', reason: 'disabled' },
      { skip: 'busy', minute: '2025-06-01T10:00:00.000Z', reason: 'overlap' },
      { fire: 'free', minute: '2025-06-01T10:00:00.000Z', catchUp: false },
    ]);
  });

  it('does not catch up missed minutes by default, and records them', () => {
    const ds = dueJobs({
      ...base,
      lastTick: at('2025-06-01T07:12Z'),
      jobs: [job({ name: 'hourly', cron: '5 * * * *' })],
      running: NONE,
    });
    expect(brief(ds)).toEqual([
      { skip: 'hourly', minute: '2025-06-01T09:05:00.000Z', reason: 'missed_while_down' },
    ]);
    expect(ds[0]?.missed).toEqual({
      first: at('2025-06-01T08:05Z'),
      last: at('2025-06-01T09:05Z'),
      count: null,
    });
  });

  it('with catch_up = "latest" runs only the most recent missed minute, once', () => {
    const ds = dueJobs({
      ...base,
      lastTick: at('2025-06-01T07:12Z'),
      jobs: [job({ name: 'hourly', cron: '5 * * * *', catchUp: 'latest' })],
      running: NONE,
    });
    expect(brief(ds)).toEqual([{ fire: 'hourly', minute: '2025-06-01T09:05:00.000Z', catchUp: true }]);
  });

  it('with catch_up = "latest" does not catch up a job that is due in this minute anyway', () => {
    const ds = dueJobs({
      ...base,
      lastTick: at('2025-06-01T07:12Z'),
      jobs: [job({ name: 'q', cron: '*/15 * * * *', catchUp: 'latest' })],
      running: NONE,
    });
    expect(brief(ds)).toEqual([
      { skip: 'q', minute: '2025-06-01T09:45:00.000Z', reason: 'missed_while_down' },
      { fire: 'q', minute: '2025-06-01T10:00:00.000Z', catchUp: false },
    ]);
  });

  it('sees no missed minutes on the first start ever or after a restart in the same minute', () => {
    const jobs = [job({ name: 'q', cron: '* * * * *', catchUp: 'latest' })];
    expect(brief(dueJobs({ ...base, lastTick: null, jobs, running: NONE }))).toEqual([
      { fire: 'q', minute: '2025-06-01T10:00:00.000Z', catchUp: false },
    ]);
    expect(brief(dueJobs({ ...base, lastTick: m, jobs, running: NONE }))).toEqual([
      { fire: 'q', minute: '2025-06-01T10:00:00.000Z', catchUp: false },
    ]);
  });
});

// Property: over a simulated week with random downtime, every job fires exactly at its
// schedule's minutes while svcd is up, each once (plus, with catch_up = "latest", the most
// recent missed minute after each downtime). The oracle (test/support/cron-oracle.ts)
// matches expressions itself, without croner. cron.property.test.ts checks the same
// property on the real component with state.db.
describe('dueJobs property', () => {
  it('fires each scheduled minute while up exactly once, over a week of random restarts', () => {
    const WEEK = 7 * 24 * 60 * MIN;
    fc.assert(
      fc.property(fc.array(jobArb, { minLength: 1, maxLength: 4 }), uptimeArb(WEEK, 24), (arbs, ups) => {
        const jobs = jobsOf(arbs).map((j) => job(j));
        // What svcd persists across restarts: dedup keys, the last tick, heartbeat slots.
        const dedup = new Set<string>();
        const heartbeats = new Map<string, number>();
        let lastTick: number | null = null;
        const fired: string[] = [];
        const process = (minute: number) => {
          const ds = dueJobs({ jobs, minute, lastTick, heartbeats, running: NONE });
          for (const d of ds) {
            const key = `${d.job.name}@${new Date(d.minute).toISOString()}`;
            if (dedup.has(key)) continue;
            dedup.add(key);
            if (d.action === 'fire') fired.push(key);
          }
          for (const [k, v] of heartbeatSlots(ds)) heartbeats.set(k, v);
          lastTick = lastTick === null ? minute : Math.max(lastTick, minute);
        };
        for (const { start, stop } of ups) {
          process(minuteOf(start)); // the start-up tick
          for (let b = minuteOf(start) + MIN; b < stop; b += MIN) process(b);
        }
        expect(fired.sort()).toEqual(expectedFires(arbs, ups));
      }),
      { numRuns: 40 },
    );
  });
});
