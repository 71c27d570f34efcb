// cron.list and cron.describe over a real mgmt.sock, from a cron component on a FakeClock:
// next fires in the cron timezone, last fires, and what a job does with missed minutes.
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
import { makeTempDir } from '../../../test/support/tmp.js';
import type { CronDescribe, CronList } from '../../protocol/cron.js';
import type { SvcError } from '../../protocol/errors.js';

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

async function start(now: string) {
  const h = await startCron({ home: tmp.dir, now: at(now) });
  open.push(h);
  return h;
}

describe('cron views', () => {
  it('lists jobs with their next fire in the cron timezone', async () => {
    writeCronToml(
      tmp.dir,
      `timezone = "Europe/Berlin"\n\n${toml(
        signalJob('standup', '30 9 * * 1-5'),
        'name = "hb"\nkind = "heartbeat"\ninterval = "90s"\nsession = "ops"\nprompt = "beat"',
        signalJob('off', '* * * * *', 'enabled = false'),
      )}`,
    );
    const h = await start('2025-06-02T10:00:10Z'); // Monday, 12:00 in Berlin
    const list = await h.call<CronList>('cron.list');
    expect(list.timezone).toBe('Europe/Berlin');
    expect(list.last_tick).toBe('2025-06-02T10:00:00.000Z');
    expect(
      list.jobs.map((j) => [j.name, j.kind, j.next_fire, j.next_fire_local, j.last_fire?.outcome ?? null]),
    ).toEqual([
      ['standup', 'schedule', '2025-06-03T07:30:00.000Z', '2025-06-03T09:30:00+02:00', null],
      ['hb', 'heartbeat', '2025-06-02T10:02:00.000Z', '2025-06-02T12:02:00+02:00', 'ok'],
      ['off', 'schedule', null, null, 'skipped'],
    ]);
    expect(list.jobs[1]?.interval_ms).toBe(2 * MIN);
  });

  it('describes a job with its full config, last fire and what happens to missed minutes', async () => {
    writeCronToml(tmp.dir, toml(signalJob('a', '*/10 * * * *')));
    const h = await start('2025-06-02T10:00:10Z');
    await h.cron.idle();
    const d = await h.call<CronDescribe>('cron.describe', { name: 'a' });
    expect(d).toMatchObject({
      name: 'a',
      schedule: '*/10 * * * *',
      session: 'agent-a',
      prompt: 'ping a',
      dispatch: 'signal',
      enabled: true,
      catch_up: 'none',
      timeout_ms: null,
      line: 1,
      next_fire: '2025-06-02T10:10:00.000Z',
      last_fire: { scheduled_minute: '2025-06-02T10:00:00.000Z', outcome: 'ok' },
    });
    expect(d.missed_minutes).toMatch(/^Minutes missed while svcd is down are not caught up/);
    const err = await h.call('cron.describe', { name: 'nope' }).catch((e: unknown) => e);
    expect((err as SvcError).code).toBe('not_found');
    const bad = await h.call('cron.history', { name: 'a', limit: 0 }).catch((e: unknown) => e);
    expect((bad as SvcError).code).toBe('validation_failed');
  });
});
