// A tower process on PostgreSQL reached through a proxy that refuses, resets, stalls and slows
// its connections (test/support/fault-proxy.ts), under writers and a feed reader. Through every
// fault: answers are 201 or 503 with Retry-After (never 500, never a hang), the process stays
// up, /readyz answers and says 503 while the store cannot serve, the tower recovers without a
// restart, and every acknowledged write is in the store and on the feed exactly once. The
// figures it prints are the ones in docs/operations.md.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import pg from 'pg';
import { afterEach, describe, expect, it } from 'vitest';
import { type FaultProxy, startFaultProxy } from '../support/fault-proxy.js';
import { createTestSchema, PG_BASE_URL } from '../support/pg.js';
import { waitFor } from '../support/poll.js';
import { startTowerProc, stopAll, type TowerProc } from '../support/procs.js';
import {
  type FaultReport,
  faultReport,
  followDomains,
  type Load,
  type Probe,
  probeReady,
  startWriters,
} from '../support/store-load.js';
import { makeTempDir } from '../support/tmp.js';

const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  await stopAll();
  for (const c of cleanups.splice(0).reverse()) await c();
});

/** The tower's limits in this test, short so faults show quickly (defaults: 15 s, 5 s, 10 s). */
const FLAGS = [
  '--request-deadline',
  '3s',
  '--store-connect-timeout',
  '1s',
  '--store-statement-timeout',
  '2s',
];

interface Fault {
  name: string;
  begin(p: FaultProxy): Promise<void> | void;
  /** What must have happened before the fault is lifted. */
  until: 'refused' | 'served';
  end(p: FaultProxy): Promise<void> | void;
}

const FAULTS: Fault[] = [
  {
    // PostgreSQL restarting: open connections cut, new ones refused for a while.
    name: 'refuse',
    begin: async (p) => {
      p.reset();
      await p.refuse();
    },
    until: 'refused',
    end: (p) => p.accept(),
  },
  { name: 'reset', begin: (p) => p.reset(), until: 'served', end: () => {} },
  // A partition: nothing moves, nothing breaks.
  { name: 'stall', begin: (p) => p.stall(), until: 'refused', end: (p) => p.resume() },
  // The crash of issue 28: a stall, then every connection reset.
  {
    name: 'stall+reset',
    begin: (p) => p.stall(),
    until: 'refused',
    end: (p) => {
      p.reset();
      p.resume();
    },
  },
  { name: 'slow', begin: (p) => p.slow(25), until: 'served', end: (p) => p.slow(0) },
];

describe('tower on PostgreSQL behind a faulty network', () => {
  it('answers 201 or 503, stays up, reports readiness, recovers by itself and loses no acknowledged write', async () => {
    const schema = await createTestSchema();
    cleanups.push(() => schema.drop());
    const base = new URL(PG_BASE_URL);
    const proxy = await startFaultProxy({ host: base.hostname, port: Number(base.port || 5432) });
    cleanups.push(() => proxy.close());
    const viaProxy = new URL(schema.url);
    viaProxy.host = `127.0.0.1:${proxy.port}`;
    const tmp = makeTempDir('svc-pg-faults-');
    cleanups.push(() => tmp.remove());
    const tower: TowerProc = await startTowerProc({ SVC_HOME: tmp.dir }, [
      '--database',
      viaProxy.toString(),
      '--rate-limit',
      '0',
      ...FLAGS,
    ]);
    const admin = readFileSync(join(tmp.dir, 'tower', 'admin.token'), 'utf8').trim();
    const feed = followDomains(tower.url, admin);
    cleanups.push(() => feed.close());
    const load: Load = startWriters(tower.url, admin, 3);
    cleanups.push(() => load.stop());
    await waitFor('the first writes', () => load.answers.filter((a) => a.status === 201).length >= 10);

    const reports: FaultReport[] = [];
    for (const fault of FAULTS) {
      const from = load.now();
      const probes: Probe[] = [];
      await fault.begin(proxy);
      const during = () => load.answers.filter((a) => a.start >= from);
      if (fault.until === 'refused') {
        await waitFor(`a write refused during "${fault.name}"`, () => during().some((a) => a.status === 503));
        await waitFor(`/readyz to say not ready during "${fault.name}"`, async () => {
          const p = await probeReady(tower.url, load);
          probes.push(p);
          return p.status === 503;
        });
      } else {
        await waitFor(`writes served during "${fault.name}"`, () => {
          return during().filter((a) => a.status === 201).length >= 20;
        });
        probes.push(await probeReady(tower.url, load));
      }
      const lifted = load.now();
      await fault.end(proxy);
      // Recovery without a restart: a write acknowledged after the fault ended, and ready.
      await waitFor(`a write served after "${fault.name}"`, () =>
        load.answers.some((a) => a.start >= lifted && a.status === 201),
      );
      await waitFor(`/readyz ready after "${fault.name}"`, async () => {
        const p = await probeReady(tower.url, load);
        probes.push(p);
        return p.status === 200;
      });
      reports.push(faultReport(fault.name, load.answers, from, lifted, probes));
      // The process is alive through every fault.
      expect(await Promise.race([tower.exited, Promise.resolve('running')])).toBe('running');
    }
    await load.stop();
    console.log(`store faults (PostgreSQL, ${FLAGS.join(' ')}):\n${JSON.stringify(reports, null, 1)}`);

    // Every answer was a 201 or a 503 with a store code and Retry-After; never a 500, never
    // a request left without an answer.
    const statuses = new Set(load.answers.map((a) => a.status));
    expect([...statuses].sort()).toEqual(statuses.has(503) ? [201, 503] : [201]);
    for (const a of load.answers.filter((x) => x.status === 503)) {
      expect(a.code).toBe('unavailable');
      expect(Number(a.retryAfter)).toBeGreaterThan(0);
    }
    // Nothing acknowledged is lost: every 201 is stored; every stored domain (a 503 may
    // have committed) is on the feed exactly once.
    const acked = load.answers.flatMap((a) => (a.id ? [a.id] : []));
    const direct = new pg.Client({ connectionString: PG_BASE_URL });
    await direct.connect();
    const stored = (
      await direct.query<{ id: string }>(`select id from "${schema.schema}".domains where name like 'load-%'`)
    ).rows.map((r) => r.id);
    await direct.end();
    const storedSet = new Set(stored);
    expect(acked.filter((id) => !storedSet.has(id))).toEqual([]);
    await waitFor('every stored domain on the feed', () => {
      const seen = new Set(feed.created());
      return stored.every((id) => seen.has(id));
    });
    const onFeed = feed.created().filter((id) => storedSet.has(id));
    expect(onFeed.length).toBe(stored.length);
    expect(new Set(onFeed).size).toBe(stored.length);
    expect(tower.stderr()).not.toContain('unhandled error');
  });
});
