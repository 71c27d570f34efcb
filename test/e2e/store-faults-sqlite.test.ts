// A tower process on SQLite whose disk fills up, and whose database another process locks,
// under writers and a feed reader. While writes fail: they answer 503 storage_full (or
// storage_busy) with Retry-After, the log names the cause and the file, /readyz says 503 and
// why, reads and the feed keep serving. Once space is back (the lock released), writes work
// again without a restart, and every acknowledged write is in the store and on the feed once.
// The figures it prints are the ones in docs/operations.md.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterEach, describe, expect, it } from 'vitest';
import { openStream } from '../support/feed-stream.js';
import { waitFor } from '../support/poll.js';
import { startTowerProc, stopAll } from '../support/procs.js';
import { smallDisk } from '../support/small-disk.js';
import {
  type FaultReport,
  faultReport,
  followDomains,
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

/** The tower's busy timeout in this test, short so the lock shows quickly (default 5 s). */
const FLAGS = ['--store-busy-timeout', '1s'];

describe('tower on SQLite with a disk that fills and a lock held elsewhere', () => {
  it('refuses writes with 503 while they fail, keeps reads and the feed, and recovers by itself', async (t) => {
    const disk = smallDisk(8);
    if ('skip' in disk) {
      t.skip(`no small disk here: ${disk.skip}`);
      return;
    }
    cleanups.push(() => disk.close());
    const home = makeTempDir('svc-sqlite-faults-');
    cleanups.push(() => home.remove());
    const tower = await startTowerProc({ SVC_HOME: home.dir }, [
      '--data-dir',
      disk.dir,
      '--rate-limit',
      '0',
      ...FLAGS,
    ]);
    disk.attach(tower.child.pid as number);
    const admin = readFileSync(join(disk.dir, 'admin.token'), 'utf8').trim();
    const feed = followDomains(tower.url, admin);
    cleanups.push(() => feed.close());
    const load = startWriters(tower.url, admin, 3);
    cleanups.push(() => load.stop());
    await waitFor('the first writes', () => load.answers.filter((a) => a.status === 201).length >= 10);
    const reports: FaultReport[] = [];
    const codes = disk.how === 'tmpfs' ? ['storage_full'] : ['storage_full', 'storage_io_error'];

    // 1. The disk fills up.
    let from = load.now();
    disk.fill();
    const probes: Probe[] = [];
    await waitFor('a write refused for lack of space', () =>
      load.answers.some((a) => a.start >= from && a.status === 503),
    );
    await waitFor('/readyz to say not ready', async () => {
      const p = await probeReady(tower.url, load);
      probes.push(p);
      return p.status === 503;
    });
    const notReady = probes[probes.length - 1] as Probe;
    expect(notReady.detail).toMatch(/no space left|cannot read or write/);
    // Reads keep serving: a list, and a new feed stream replaying from the start.
    const list = await fetch(`${tower.url}/domains?limit=5`, {
      headers: { authorization: `Bearer ${admin}` },
    });
    expect(list.status).toBe(200);
    const replay = openStream(`${tower.url}/events/stream?type=matrix`, admin, { 'last-event-id': '0' });
    cleanups.push(() => replay.close());
    await waitFor('a new feed stream to replay', () => replay.got.length >= 10);
    // The log names the cause and the file, once.
    const dbFile = join(disk.dir, 'tower.db');
    await waitFor('the log line naming the full disk', () => tower.stderr().includes(dbFile));
    expect(tower.stderr()).toMatch(disk.how === 'tmpfs' ? /SQLITE_FULL/ : /SQLITE_FULL|SQLITE_IOERR/);
    let lifted = load.now();
    disk.free();
    await waitFor('a write served once space is back', () =>
      load.answers.some((a) => a.start >= lifted && a.status === 201),
    );
    await waitFor('/readyz ready once space is back', async () => {
      const p = await probeReady(tower.url, load);
      probes.push(p);
      return p.status === 200;
    });
    reports.push(faultReport(`disk full (${disk.how})`, load.answers, from, lifted, probes));
    const fullAnswers = load.answers.filter((a) => a.start >= from && a.start < lifted && a.status === 503);
    for (const a of fullAnswers) {
      expect(codes).toContain(a.code);
      expect(Number(a.retryAfter)).toBeGreaterThan(0);
    }

    // 2. Another process holds the write lock past the busy timeout.
    const other = new Database(dbFile);
    cleanups.push(() => {
      if (other.open) other.close();
    });
    from = load.now();
    other.exec('begin immediate');
    const busyProbes: Probe[] = [];
    await waitFor('a write refused as busy', () =>
      load.answers.some((a) => a.start >= from && a.code === 'storage_busy'),
    );
    await waitFor('/readyz to say not ready while locked', async () => {
      const p = await probeReady(tower.url, load);
      busyProbes.push(p);
      return p.status === 503;
    });
    lifted = load.now();
    other.exec('rollback');
    other.close();
    await waitFor('a write served once the lock is released', () =>
      load.answers.some((a) => a.start >= lifted && a.status === 201),
    );
    await waitFor('/readyz ready once the lock is released', async () => {
      const p = await probeReady(tower.url, load);
      busyProbes.push(p);
      return p.status === 200;
    });
    reports.push(faultReport('locked by another process', load.answers, from, lifted, busyProbes));
    for (const a of load.answers.filter((x) => x.start >= from && x.start < lifted && x.status === 503)) {
      expect(a.code).toBe('storage_busy');
    }

    await load.stop();
    console.log(`store faults (SQLite, ${FLAGS.join(' ')}):\n${JSON.stringify(reports, null, 1)}`);
    expect(await Promise.race([tower.exited, Promise.resolve('running')])).toBe('running');
    // Never a 500, never a request without an answer.
    for (const a of load.answers) expect([201, 503]).toContain(a.status);
    // Nothing acknowledged is lost, nothing is doubled on the feed.
    const acked = load.answers.flatMap((a) => (a.id ? [a.id] : []));
    const ro = new Database(dbFile, { readonly: true });
    const stored = (
      ro.prepare("select id from domains where name like 'load-%'").all() as { id: string }[]
    ).map((r) => r.id);
    ro.close();
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
