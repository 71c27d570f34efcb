// The cron component on a FakeClock with a real state.db, a real mgmt.sock and real bash
// processes: ticks, dedup across restarts, downtime, dispatch outcomes, reload, gc (the
// list and describe views: methods.test.ts).
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import {
  at,
  type CronHarness,
  MIN,
  signalJob,
  startCron,
  cronToml as toml,
  writeCronToml,
} from '../../../test/support/cron.js';
import { waitFor } from '../../../test/support/poll.js';
import { makeTempDir } from '../../../test/support/tmp.js';
import type { CronFire, CronGc, CronHistory, CronList, CronReload } from '../../protocol/cron.js';
import { isSvcError, type SvcError } from '../../protocol/errors.js';
import { signalUnavailable } from './cron.js';
import * as store from './store.js';

let tmp: { dir: string; remove(): void };
let open: CronHarness[] = [];

beforeEach(() => {
  tmp = makeTempDir('svc-cron-');
  open = [];
});
afterEach(async () => {
  for (const h of open) await h.stop();
  tmp.remove();
});

async function start(now: string | number, more: Partial<Parameters<typeof startCron>[0]> = {}) {
  const h = await startCron({ home: tmp.dir, now: typeof now === 'number' ? now : at(now), ...more });
  open.push(h);
  return h;
}

async function history(h: CronHarness, name: string): Promise<CronFire[]> {
  return (await h.call<CronHistory>('cron.history', { name })).items;
}

const brief = (items: CronFire[]) =>
  items.map((f) => ({
    minute: f.scheduled_minute,
    outcome: f.outcome,
    reason: f.reason,
    catch_up: f.catch_up,
  }));

describe('cron tick', () => {
  it('fires a due job once at its minute boundary and records it', async () => {
    writeCronToml(tmp.dir, toml(signalJob('standup', '0 10 * * *')));
    const h = await start('2025-06-02T09:59:30Z');
    expect(h.signals).toEqual([]);
    await h.clock.advance(29_999);
    expect(h.signals).toEqual([]);
    await h.clock.advance(1);
    await h.cron.idle();
    expect(h.signals).toEqual([['agent-standup', 'ping standup']]);
    await h.clock.advance(10 * MIN);
    await h.cron.idle();
    expect(h.signals).toHaveLength(1);
    const [fire] = await history(h, 'standup');
    expect(fire).toMatchObject({
      job: 'standup',
      scheduled_minute: '2025-06-02T10:00:00.000Z',
      dispatch: 'signal',
      outcome: 'ok',
      reason: null,
      catch_up: false,
      started_at: '2025-06-02T10:00:00.000Z',
      exit_code: null,
    });
  });

  it('ticks at every minute boundary with one timer at a time', async () => {
    writeCronToml(tmp.dir, toml(signalJob('every', '* * * * *')));
    const h = await start('2025-06-02T10:00:20Z');
    for (let i = 0; i < 5; i++) {
      await h.clock.advance(MIN);
      expect(h.clock.pending()).toBe(1);
    }
    await h.cron.idle();
    expect(brief(await history(h, 'every')).map((f) => f.minute)).toEqual([
      '2025-06-02T10:05:00.000Z',
      '2025-06-02T10:04:00.000Z',
      '2025-06-02T10:03:00.000Z',
      '2025-06-02T10:02:00.000Z',
      '2025-06-02T10:01:00.000Z',
      '2025-06-02T10:00:00.000Z',
    ]);
  });

  it('publishes a matrix event with job, scheduled minute and outcome for every fire', async () => {
    writeCronToml(
      tmp.dir,
      toml(signalJob('a', '* * * * *'), signalJob('off', '* * * * *', 'enabled = false')),
    );
    const h = await start('2025-06-02T10:00:20Z');
    await h.cron.idle();
    const payloads = h.events.map((e) => [e.type, e.payload]);
    expect(payloads).toEqual([
      [
        'matrix',
        {
          kind: 'cron.fire',
          node_id: 'node_test',
          job: 'off',
          scheduled_minute: '2025-06-02T10:00:00.000Z',
          dispatch: 'signal',
          outcome: 'skipped',
          reason: 'disabled',
          catch_up: false,
          exit_code: null,
          duration_ms: null,
        },
      ],
      [
        'matrix',
        {
          kind: 'cron.fire',
          node_id: 'node_test',
          job: 'a',
          scheduled_minute: '2025-06-02T10:00:00.000Z',
          dispatch: 'signal',
          outcome: 'ok',
          reason: null,
          catch_up: false,
          exit_code: null,
          duration_ms: 0,
        },
      ],
    ]);
  });

  it('records a failed signal with the error when the agent cannot be signalled', async () => {
    writeCronToml(tmp.dir, toml(signalJob('a', '* * * * *')));
    const h = await start('2025-06-02T10:00:20Z', { signal: signalUnavailable });
    await h.cron.idle();
    const [fire] = await history(h, 'a');
    expect(fire?.outcome).toBe('failed');
    expect(fire?.detail).toBe(
      'signal to "agent-a" failed: no agent "agent-a" to signal: this svcd has no agent supervisor yet, so signal jobs cannot run [agent_not_found]',
    );
  });
});

describe('cron restarts', () => {
  it('does not fire twice when svcd dies right after the dedup write and restarts in the same minute', async () => {
    writeCronToml(tmp.dir, toml(signalJob('a', '* * * * *')));
    // The first process claims 10:00 and starts a dispatch that never finishes: it dies.
    let dispatched = 0;
    const first = await start('2025-06-02T10:00:05Z', {
      signal: () => {
        dispatched++;
        return new Promise(() => {});
      },
    });
    expect(dispatched).toBe(1);
    await first.crash();
    const second = await start('2025-06-02T10:00:40Z', { sock: 'mgmt2.sock' });
    expect(second.signals).toEqual([]);
    expect(brief(await history(second, 'a'))).toEqual([
      { minute: '2025-06-02T10:00:00.000Z', outcome: 'interrupted', reason: null, catch_up: false },
    ]);
    // The next minute is a new key and fires normally.
    await second.clock.advance(20_000);
    await second.cron.idle();
    expect(second.signals).toEqual([['agent-a', 'ping a']]);
  });

  it('does not catch up minutes missed while down, and records them as skipped', async () => {
    writeCronToml(tmp.dir, toml(signalJob('q', '*/5 * * * *')));
    const first = await start('2025-06-02T10:00:05Z');
    await first.stop();
    const second = await start('2025-06-02T10:17:30Z');
    await second.clock.advance(3 * MIN);
    await second.cron.idle();
    expect(brief(await history(second, 'q'))).toEqual([
      { minute: '2025-06-02T10:20:00.000Z', outcome: 'ok', reason: null, catch_up: false },
      {
        minute: '2025-06-02T10:15:00.000Z',
        outcome: 'skipped',
        reason: 'missed_while_down',
        catch_up: false,
      },
      { minute: '2025-06-02T10:00:00.000Z', outcome: 'ok', reason: null, catch_up: false },
    ]);
    const [, missed] = await history(second, 'q');
    expect(missed?.detail).toBe(
      'missed while svcd was down (scheduled minutes from 2025-06-02T10:05:00.000Z to 2025-06-02T10:15:00.000Z); not caught up',
    );
    expect(second.signals).toHaveLength(1);
  });

  it('with catch_up = "latest" runs the most recent missed minute once at start', async () => {
    writeCronToml(tmp.dir, toml(signalJob('q', '*/5 * * * *', 'catch_up = "latest"')));
    const first = await start('2025-06-02T10:00:05Z');
    await first.stop();
    const second = await start('2025-06-02T10:17:30Z');
    await second.cron.idle();
    expect(second.signals).toEqual([['agent-q', 'ping q']]);
    // A restart in the same minute finds the catch-up's key and does not repeat it.
    await second.stop();
    const third = await start('2025-06-02T10:17:50Z');
    await third.cron.idle();
    expect(third.signals).toEqual([]);
    expect(brief(await history(third, 'q'))).toEqual([
      { minute: '2025-06-02T10:15:00.000Z', outcome: 'ok', reason: null, catch_up: true },
      { minute: '2025-06-02T10:00:00.000Z', outcome: 'ok', reason: null, catch_up: false },
    ]);
  });

  it('does not fire already-handled minutes again when the clock is set back', async () => {
    writeCronToml(tmp.dir, toml(signalJob('a', '* * * * *')));
    const first = await start('2025-06-02T10:00:10Z');
    await first.clock.advance(3 * MIN); // 10:00 … 10:03
    await first.stop();
    // The host clock goes back 5 minutes (NTP step): 09:58 and 09:59 are new minutes,
    // 10:00 … 10:03 were handled and stay so.
    const second = await start('2025-06-02T09:58:10Z');
    await second.clock.advance(6 * MIN);
    await second.cron.idle();
    expect(brief(await history(second, 'a')).map((f) => [f.minute, f.outcome])).toEqual([
      ['2025-06-02T10:04:00.000Z', 'ok'],
      ['2025-06-02T09:59:00.000Z', 'ok'],
      ['2025-06-02T09:58:00.000Z', 'ok'],
      ['2025-06-02T10:03:00.000Z', 'ok'],
      ['2025-06-02T10:02:00.000Z', 'ok'],
      ['2025-06-02T10:01:00.000Z', 'ok'],
      ['2025-06-02T10:00:00.000Z', 'ok'],
    ]);
    expect(second.signals).toHaveLength(3);
  });

  it('fires a heartbeat when its interval has elapsed since the last fire, across restarts', async () => {
    writeCronToml(
      tmp.dir,
      toml('name = "hb"\nkind = "heartbeat"\ninterval = "1h30m"\nsession = "ops"\nprompt = "beat"'),
    );
    const first = await start('2025-06-02T10:00:10Z');
    await first.clock.advance(60 * MIN);
    await first.stop();
    const second = await start('2025-06-02T11:20:10Z');
    await second.clock.advance(15 * MIN);
    await second.cron.idle();
    expect(first.signals).toEqual([['ops', 'beat']]);
    expect(second.signals).toEqual([['ops', 'beat']]);
    expect(brief(await history(second, 'hb')).map((f) => f.minute)).toEqual([
      '2025-06-02T11:30:00.000Z',
      '2025-06-02T10:00:00.000Z',
    ]);
  });
});

describe('cron with state.db refusing writes', () => {
  it('fires nothing while the dedup keys cannot be made durable, reports the skips, and resumes by itself', async () => {
    writeCronToml(tmp.dir, toml(signalJob('every', '* * * * *')));
    const h = await start('2025-06-02T10:00:20Z');
    await h.cron.idle();
    expect(h.signals).toHaveLength(1);
    // SQLite refuses every write from now on (SQLITE_READONLY), as on a full or read-only disk.
    h.store.db.exec('pragma query_only = 1');
    const before = h.events.length;
    await h.clock.advance(MIN);
    await h.cron.idle();
    expect(h.signals).toHaveLength(1);
    expect(h.events.slice(before).map((e) => e.payload)).toEqual([
      {
        kind: 'cron.fire',
        node_id: 'node_test',
        job: 'every',
        scheduled_minute: '2025-06-02T10:01:00.000Z',
        dispatch: 'signal',
        outcome: 'skipped',
        reason: 'state_unwritable',
        catch_up: false,
        exit_code: null,
        duration_ms: null,
      },
    ]);
    const list = await h.call<CronList>('cron.list');
    expect(list.state_error).toMatch(
      /state\.db cannot be written since .*SQLITE_READONLY.*; 1 fires skipped$/,
    );
    expect(h.cron.status?.()).toMatchObject({
      state_error: { skipped_fires: 1, last_minute: '2025-06-02T10:01:00.000Z' },
    });

    h.store.db.exec('pragma query_only = 0');
    await h.clock.advance(MIN);
    await h.cron.idle();
    expect(h.signals).toHaveLength(2);
    expect((await h.call<CronList>('cron.list')).state_error).toBeNull();
    // The refused minute is not recorded as missed while down, nor caught up.
    expect(brief(await history(h, 'every'))).toEqual([
      { minute: '2025-06-02T10:02:00.000Z', outcome: 'ok', reason: null, catch_up: false },
      { minute: '2025-06-02T10:00:00.000Z', outcome: 'ok', reason: null, catch_up: false },
    ]);
  });
});

describe('cron dispatch = "bash"', () => {
  const bashJob = (name: string, schedule: string, command: string, extra = '') =>
    `name = "${name}"\nschedule = "${schedule}"\ndispatch = "bash"\nprompt = '''${command}'''\n${extra}`;

  it('records exit code, duration and the last 4 KiB of output', async () => {
    writeCronToml(
      tmp.dir,
      toml(
        bashJob(
          'out',
          '0 10 * * *',
          'head -c 5000 /dev/zero | tr "\\0" x; echo; echo "job $SVC_CRON_JOB at $SVC_CRON_SCHEDULED_MINUTE" >&2; exit 3',
        ),
      ),
    );
    const h = await start('2025-06-02T10:00:01Z');
    await waitFor('the bash job to finish', async () => (await history(h, 'out'))[0]?.outcome !== 'running');
    const [fire] = await history(h, 'out');
    expect(fire?.outcome).toBe('failed');
    expect(fire?.exit_code).toBe(3);
    expect(fire?.detail).toBe('exit code 3');
    expect(fire?.duration_ms).toBe(0); // the fake clock did not move
    expect(Buffer.byteLength(fire?.output_tail ?? '')).toBe(4096);
    expect(fire?.output_tail?.endsWith('x\njob out at 2025-06-02T10:00:00.000Z\n')).toBe(true);
  });

  it('skips a job whose previous run is still going, and records the skip', async () => {
    writeCronToml(tmp.dir, toml(bashJob('slow', '* * * * *', 'exec sleep 30')));
    const h = await start('2025-06-02T10:00:01Z');
    await h.clock.advance(MIN);
    expect(brief(await history(h, 'slow'))).toEqual([
      { minute: '2025-06-02T10:01:00.000Z', outcome: 'skipped', reason: 'overlap', catch_up: false },
      { minute: '2025-06-02T10:00:00.000Z', outcome: 'running', reason: null, catch_up: false },
    ]);
    expect((await history(h, 'slow'))[0]?.detail).toBe(
      'the fire of 2025-06-02T10:00:00.000Z is still running',
    );
    await h.cron.stop();
    const rows = await store.history(h.store.db as unknown as store.CronDb, 'slow', 10);
    expect(rows.map((r) => [r.scheduled_minute, r.outcome])).toEqual([
      ['2025-06-02T10:01:00.000Z', 'skipped'],
      ['2025-06-02T10:00:00.000Z', 'interrupted'],
    ]);
  });

  it('kills the whole process group at the timeout', async () => {
    const pidFile = join(tmp.dir, 'child.pid');
    writeCronToml(
      tmp.dir,
      toml(bashJob('stuck', '0 10 * * *', `sleep 300 & echo $! > ${pidFile}; wait`, 'timeout = "2m"')),
    );
    const h = await start('2025-06-02T10:00:01Z');
    const pid = await waitFor('the job to start its child', () =>
      existsSync(pidFile) && readFileSync(pidFile, 'utf8').trim() !== ''
        ? Number(readFileSync(pidFile, 'utf8'))
        : null,
    );
    expect(alive(pid)).toBe(true);
    await h.clock.advance(2 * MIN);
    await h.cron.idle();
    const [fire] = await history(h, 'stuck');
    expect(fire?.outcome).toBe('timeout');
    expect(fire?.detail).toBe('killed after the timeout of 120 s');
    expect(fire?.duration_ms).toBe(2 * MIN);
    await waitFor('the grandchild to be gone', () => !alive(pid));
  });

  it('kills running jobs when svcd stops and records them as interrupted', async () => {
    writeCronToml(tmp.dir, toml(bashJob('long', '0 10 * * *', 'exec sleep 300')));
    const h = await start('2025-06-02T10:00:01Z');
    await h.cron.stop();
    const rows = await store.history(h.store.db as unknown as store.CronDb, 'long', 10);
    expect(rows.map((r) => [r.outcome, r.detail])).toEqual([['interrupted', 'killed: svcd stopped']]);
  });
});

describe('cron reload', () => {
  it('keeps the running config when the new file is broken, and says where', async () => {
    const file = writeCronToml(tmp.dir, toml(signalJob('a', '* * * * *')));
    const h = await start('2025-06-02T10:00:20Z');
    writeCronToml(tmp.dir, toml(signalJob('a', '* * * * *'), signalJob('b', '61 * * * *')));
    const err = await h.call('cron.reload').catch((e: unknown) => e);
    expect(isSvcError(err) && err.code).toBe('config_invalid');
    expect((err as SvcError).message).toBe(
      `cron.toml is invalid: ${file}:9: job "b": job[1].schedule: invalid cron expression: Invalid value for minute: 61`,
    );
    const list = await h.call<CronList>('cron.list');
    expect(list.jobs.map((j) => j.name)).toEqual(['a']);
    expect(list.config_error).toBe((err as SvcError).message);
    await h.clock.advance(MIN);
    await h.cron.idle();
    expect(h.signals).toHaveLength(2);

    writeCronToml(tmp.dir, toml(signalJob('a', '*/2 * * * *'), signalJob('c', '* * * * *')));
    expect(await h.call<CronReload>('cron.reload')).toEqual({
      file,
      jobs: 2,
      added: ['c'],
      removed: [],
      changed: ['a'],
    });
    expect((await h.call<CronList>('cron.list')).config_error).toBeNull();
  });

  it('starts with no jobs when cron.toml is invalid at start, and runs them after a fixed reload', async () => {
    writeCronToml(tmp.dir, 'timezone = "Nowhere/Land"\n');
    const h = await start('2025-06-02T10:00:20Z');
    const list = await h.call<CronList>('cron.list');
    expect(list.jobs).toEqual([]);
    expect(list.config_error).toMatch(/timezone: unknown time zone "Nowhere\/Land"/);
    writeCronToml(tmp.dir, toml(signalJob('a', '* * * * *')));
    await h.call('cron.reload');
    await h.clock.advance(MIN);
    await h.cron.idle();
    expect(h.signals).toEqual([['agent-a', 'ping a']]);
  });
});

describe('cron gc and history', () => {
  it('drops dedup keys older than 24 h hourly and on gc-now, and counts them', async () => {
    writeCronToml(tmp.dir, toml(signalJob('a', '* * * * *')));
    const first = await start('2025-06-02T10:00:10Z');
    await first.clock.advance(4 * MIN); // keys 10:00 … 10:04
    await first.stop();
    const second = await start('2025-06-03T10:02:30Z');
    const db = second.store.db as unknown as store.CronDb;
    // The first tick's hourly gc removed 10:00, 10:01 and 10:02 of yesterday; left are
    // yesterday's 10:03 and 10:04, today's 10:01 (the skip of the missed minutes) and 10:02.
    expect(await store.dedupCount(db)).toBe(4);
    expect(await second.call<CronGc>('cron.gc')).toEqual({
      removed: 0,
      older_than: '2025-06-02T10:02:30.000Z',
    });
    await second.clock.advance(2 * MIN);
    expect(await second.call<CronGc>('cron.gc')).toEqual({
      removed: 2,
      older_than: '2025-06-02T10:04:30.000Z',
    });
    expect(await store.dedupCount(db)).toBe(4); // today's 10:01 … 10:04
  });

  it('keeps the last 100 entries of a job, fires and skips alike', async () => {
    writeCronToml(
      tmp.dir,
      toml(signalJob('a', '* * * * *'), signalJob('off', '* * * * *', 'enabled = false')),
    );
    const h = await start('2025-06-02T10:00:10Z');
    await h.clock.advance(124 * MIN);
    await h.cron.idle();
    for (const name of ['a', 'off']) {
      const items = await history(h, name);
      expect(items).toHaveLength(100);
      expect(items[0]?.scheduled_minute).toBe('2025-06-02T12:04:00.000Z');
      expect(items[99]?.scheduled_minute).toBe('2025-06-02T10:25:00.000Z');
    }
    // Trimming runs at the first entry after start and then every 10th (125 entries here).
    const db = h.store.db as unknown as store.CronDb;
    for (const name of ['a', 'off']) {
      const n = db.get<{ n: number }>('select count(*) as n from cron_history where job = ?', [name])?.n;
      expect(n).toBe(104); // trimmed to 100 at the 121st entry, then 4 more
    }
  });
});

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}
