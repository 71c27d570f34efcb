import { appendFileSync, truncateSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { waitFor } from '../../../test/support/poll.js';
import { makeTempDir } from '../../../test/support/tmp.js';
import { RotatingLog } from '../../daemon/process/rotating-log.js';
import { systemClock } from '../../lib/clock.js';
import { type OpenedLog, openLog, rotatedFiles } from './file-log.js';

describe('a rotated log file', () => {
  let tmp: ReturnType<typeof makeTempDir>;
  const stops: AbortController[] = [];
  afterEach(() => {
    for (const s of stops) s.abort();
    tmp?.remove();
  });

  /** Follows `log` into an array until the test ends. */
  function follow(log: OpenedLog): { seen: string[]; notices: string[]; done: Promise<void>; stop(): void } {
    const stop = new AbortController();
    stops.push(stop);
    const seen: string[] = [];
    const notices: string[] = [];
    const done = log.follow((l) => seen.push(l), {
      clock: systemClock,
      pollMs: 5,
      signal: stop.signal,
      notice: (t) => notices.push(t),
    });
    return { seen, notices, done, stop: () => stop.abort() };
  }

  it('lists the rotated files oldest first, then the file', async () => {
    tmp = makeTempDir();
    const file = join(tmp.dir, 'a.log');
    for (const f of [file, `${file}.1`, `${file}.2`, `${file}.10`, `${file}.x`, `${file}.0`])
      writeFileSync(f, '');
    expect(await rotatedFiles(file)).toEqual([`${file}.10`, `${file}.2`, `${file}.1`, file]);
  });

  it('shows the last lines across the rotated files, the unfinished last line included', async () => {
    tmp = makeTempDir();
    const file = join(tmp.dir, 'a.log');
    const w = new RotatingLog(file, { maxBytes: 8, keep: 2 });
    for (const l of ['one', 'two', 'three', 'four']) w.write(`${l}\n`);
    w.write('fiv');
    w.close();
    expect(await rotatedFiles(file)).toEqual([`${file}.2`, `${file}.1`, file]);
    const all = await openLog(file, { lines: Number.POSITIVE_INFINITY, since: null });
    await all.close();
    // 8-byte files: "one\ntwo\n", "three\nfo", "ur\nfiv": "four" spans .1 and the file.
    expect(all.lines).toEqual(['one', 'two', 'three', 'four', 'fiv']);
    const last2 = await openLog(file, { lines: 2, since: null });
    await last2.close();
    expect(last2.lines).toEqual(['four', 'fiv']);
  });

  it('has no lines for a missing file', async () => {
    tmp = makeTempDir();
    const log = await openLog(join(tmp.dir, 'none.log'), { lines: 10, since: null });
    await log.close();
    expect(log.lines).toEqual([]);
  });

  it('follows a growing file and goes on across rotations, losing and repeating nothing', async () => {
    tmp = makeTempDir();
    const file = join(tmp.dir, 'svcd.log');
    const w = new RotatingLog(file, { maxBytes: 40, keep: 5 });
    w.write('before 1\nbefore 2\n');
    const log = await openLog(file, { lines: 1, since: null, follow: true });
    expect(log.lines).toEqual(['before 2']);
    const f = follow(log);
    w.write('after 1\n');
    await waitFor('the appended line', () => f.seen.length === 1);
    // A line in two writes is one line, printed once its newline arrives.
    w.write('half ');
    w.write('and half\n');
    await waitFor('the completed line', () => f.seen.length === 2);
    expect(f.seen).toEqual(['after 1', 'half and half']);
    // Over 40 bytes: the file is renamed to .1 and a new one started, several times before
    // the follower looks again; lines cut at the size limit come out whole.
    const more = Array.from({ length: 12 }, (_, i) => `rotated ${String(i).padStart(2, '0')}`);
    for (const l of more) w.write(`${l}\n`);
    await waitFor('every line across the rotations', () => f.seen.length === 2 + more.length);
    expect(f.seen).toEqual(['after 1', 'half and half', ...more]);
    f.stop();
    await f.done;
    w.close();
  });

  it('waits for a file that does not exist yet, and restarts at a truncation', async () => {
    tmp = makeTempDir();
    const file = join(tmp.dir, 'late.log');
    const log = await openLog(file, { lines: 10, since: null, follow: true });
    expect(log.lines).toEqual([]);
    const f = follow(log);
    writeFileSync(file, 'first\nsecond\n');
    await waitFor('the new file', () => f.seen.length === 2);
    truncateSync(file, 0);
    await waitFor('the truncation notice', () => f.notices.length === 1);
    appendFileSync(file, 'after truncation\n');
    await waitFor('the line after the truncation', () => f.seen.length === 3);
    expect(f.seen).toEqual(['first', 'second', 'after truncation']);
    expect(f.notices).toEqual([`${file} was truncated; reading it from its start`]);
    f.stop();
    await f.done;
  });
});
