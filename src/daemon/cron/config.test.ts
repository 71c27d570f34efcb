import { describe, expect, it } from 'vitest';
import { isSvcError, type SvcError } from '../../protocol/errors.js';
import { DEFAULT_BASH_TIMEOUT_MS, parseCronConfig } from './config.js';

const FILE = '/home/op/.svc/svcd/cron.toml';

function errorOf(text: string): SvcError {
  try {
    parseCronConfig(text, FILE);
  } catch (e) {
    if (isSvcError(e)) return e;
    throw e;
  }
  throw new Error('expected parseCronConfig to throw');
}

describe('parseCronConfig', () => {
  it('reads scheduled and heartbeat jobs with their defaults', () => {
    const cfg = parseCronConfig(
      `
[[job]]
name = "standup"
schedule = "30 9 * * 1-5"
session = "pm"
prompt = "post the stand-up summary"

[[job]]
name = "beat"
kind = "heartbeat"
interval = "1h30m"
session = "ops"
prompt = "check the queue"

[[job]]
name = "backup"
schedule = "0 3 * * *"
dispatch = "bash"
prompt = "tar czf /tmp/b.tgz ~/notes"
`,
      FILE,
    );
    expect(cfg.timezone).toBeNull();
    expect(cfg.jobs.map((j) => [j.name, j.line, j.dispatch, j.enabled, j.catchUp, j.timeoutMs])).toEqual([
      ['standup', 2, 'signal', true, 'none', null],
      ['beat', 8, 'signal', true, 'none', null],
      ['backup', 15, 'bash', true, 'none', DEFAULT_BASH_TIMEOUT_MS],
    ]);
    expect(cfg.jobs[0]?.schedule.kind).toBe('schedule');
    expect(cfg.jobs[1]?.schedule).toEqual({ kind: 'heartbeat', intervalMs: 90 * 60_000 });
    expect(cfg.jobs[1]?.intervalText).toBe('1h30m');
    expect(cfg.jobs[2]?.session).toBeNull();
  });

  it('rounds heartbeat intervals up to whole minutes, compounds included', () => {
    const intervals = ['30s', '90s', '1m', '1h30m', '2d', '1d12h', '1m1s', '45m30s'];
    const text = intervals
      .map(
        (iv, i) =>
          `[[job]]\nname = "b${i}"\nkind = "heartbeat"\ninterval = "${iv}"\nsession = "s"\nprompt = "p"\n`,
      )
      .join('\n');
    const cfg = parseCronConfig(text, FILE);
    expect(
      cfg.jobs.map((j) => (j.schedule.kind === 'heartbeat' ? j.schedule.intervalMs / 60_000 : -1)),
    ).toEqual([1, 2, 1, 90, 2880, 2160, 2, 46]);
  });

  it('applies the optional extras: enabled, timeout (per job and global), catch_up, timezone', () => {
    const cfg = parseCronConfig(
      `timezone = "Europe/Berlin"
timeout = "30m"

[[job]]
name = "a"
schedule = "0 * * * *"
dispatch = "bash"
prompt = "true"

[[job]]
name = "b"
schedule = "0 * * * *"
dispatch = "bash"
prompt = "true"
timeout = "90s"
enabled = false
catch_up = "latest"
`,
      FILE,
    );
    expect(cfg.timezone).toBe('Europe/Berlin');
    expect(cfg.jobs.map((j) => [j.name, j.timeoutMs, j.enabled, j.catchUp])).toEqual([
      ['a', 30 * 60_000, true, 'none'],
      ['b', 90_000, false, 'latest'],
    ]);
    const s = cfg.jobs[0]?.schedule;
    expect(s?.kind === 'schedule' ? s.timezone : null).toBe('Europe/Berlin');
  });

  it('treats an empty file as no jobs', () => {
    expect(parseCronConfig('# nothing yet\n', FILE).jobs).toEqual([]);
  });

  it('names the file, line and column of a TOML syntax error', () => {
    const e = errorOf('[[job]]\nname = "a"\nschedule = = "x"\n');
    expect(e.code).toBe('config_invalid');
    expect(e.message).toBe(`cron.toml is invalid: ${FILE}:3: (syntax): invalid value (column 12)`);
  });

  it('names file, line, job and field of a duplicate name', () => {
    const e = errorOf(
      '[[job]]\nname = "a"\nschedule = "* * * * *"\nsession = "s"\nprompt = "p"\n\n[[job]]\nname = "a"\nschedule = "0 * * * *"\nsession = "s"\nprompt = "p"\n',
    );
    expect(e.message).toBe(
      `cron.toml is invalid: ${FILE}:8: job "a": job[1].name: duplicate name; the first "a" is on line 1`,
    );
    expect(e.errors).toEqual([
      { field: 'job[1].name', message: `${FILE}:8: job "a": duplicate name; the first "a" is on line 1` },
    ]);
  });

  it('rejects both and neither of schedule and interval', () => {
    const both = errorOf(
      '[[job]]\nname = "x"\nschedule = "* * * * *"\ninterval = "5m"\nsession = "s"\nprompt = "p"\n',
    );
    expect(both.message).toBe(
      `cron.toml is invalid: ${FILE}:4: job "x": job[0].interval: both schedule and interval given: a job has one of them`,
    );
    const neither = errorOf('[[job]]\nname = "y"\nsession = "s"\nprompt = "p"\n');
    expect(neither.message).toBe(
      `cron.toml is invalid: ${FILE}:1: job "y": job[0].schedule: missing: give schedule = "<5-field cron expression>", or kind = "heartbeat" + interval`,
    );
    const hbBoth = errorOf(
      '[[job]]\nname = "z"\nkind = "heartbeat"\nschedule = "* * * * *"\ninterval = "5m"\nsession = "s"\nprompt = "p"\n',
    );
    expect(hbBoth.message).toContain(
      ':4: job "z": job[0].schedule: a heartbeat job has an interval, not a schedule',
    );
    const hbNone = errorOf('[[job]]\nname = "w"\nkind = "heartbeat"\nsession = "s"\nprompt = "p"\n');
    expect(hbNone.message).toContain(':1: job "w": job[0].interval: missing');
  });

  it('rejects a bad cron expression, a 6-field one and one that never fires', () => {
    const bad = errorOf('[[job]]\nname = "x"\nsession = "s"\nprompt = "p"\nschedule = "61 * * * *"\n');
    expect(bad.message).toBe(
      `cron.toml is invalid: ${FILE}:5: job "x": job[0].schedule: invalid cron expression: Invalid value for minute: 61`,
    );
    expect(
      errorOf('[[job]]\nname = "x"\nsession = "s"\nprompt = "p"\nschedule = "0 * * * * *"\n').message,
    ).toContain("job[0].schedule: invalid cron expression: mode '5-part' requires exactly 5 parts");
    expect(
      errorOf('[[job]]\nname = "x"\nsession = "s"\nprompt = "p"\nschedule = "0 0 31 2 *"\n').message,
    ).toContain('job[0].schedule: invalid cron expression: "0 0 31 2 *" never fires');
  });

  it('rejects an unknown dispatch, kind, catch_up and field, and a bad interval', () => {
    const e = errorOf(
      `[[job]]
name = "x"
schedule = "* * * * *"
session = "s"
prompt = "p"
dispatch = "ssh"
catch_up = "all"
colour = "red"

[[job]]
name = "y"
kind = "interval"
interval = "5m"
session = "s"
prompt = "p"

[[job]]
name = "z"
kind = "heartbeat"
interval = "5 minutes"
session = "s"
prompt = "p"
`,
    );
    expect(e.errors?.map((f) => f.field)).toEqual([
      'job[0].dispatch',
      'job[0].catch_up',
      'job[0].colour',
      'job[1].kind',
      'job[2].interval',
    ]);
    expect(e.message).toContain(
      `${FILE}:6: job "x": job[0].dispatch: unknown dispatch "ssh": use "signal" (default) or "bash"`,
    );
    expect(e.message).toContain(`${FILE}:8: job "x": job[0].colour: unknown field`);
    expect(e.message).toContain(`${FILE}:12: job "y": job[1].kind: unknown kind "interval"`);
    expect(e.message).toContain(`${FILE}:20: job "z": job[2].interval: invalid duration "5 minutes"`);
    expect(e.message.startsWith('cron.toml has 5 errors: ')).toBe(true);
  });

  it('requires a session for signal jobs and a prompt for every job', () => {
    const e = errorOf(
      '[[job]]\nname = "x"\nschedule = "* * * * *"\n\n[[job]]\nname = "b"\nschedule = "* * * * *"\ndispatch = "bash"\n',
    );
    expect(e.errors?.map((f) => f.field)).toEqual(['job[0].session', 'job[0].prompt', 'job[1].prompt']);
    expect(e.message).toContain(
      `${FILE}:1: job "x": job[0].session: missing: a signal job names the agent (profile or mux session) to signal`,
    );
  });

  it('rejects a timeout on a signal job, a numeric timeout and an unknown time zone', () => {
    const e = errorOf(
      'timezone = "Mars/Olympus"\n\n[[job]]\nname = "x"\nschedule = "* * * * *"\nsession = "s"\nprompt = "p"\ntimeout = "5m"\n\n[[job]]\nname = "y"\nschedule = "* * * * *"\ndispatch = "bash"\nprompt = "p"\ntimeout = 300\n',
    );
    expect(e.errors?.map((f) => f.field)).toEqual(['timezone', 'job[0].timeout', 'job[1].timeout']);
    expect(e.message).toContain(`${FILE}:1: timezone: unknown time zone "Mars/Olympus"`);
    expect(e.message).toContain(`${FILE}:8: job "x": job[0].timeout: only bash jobs have a timeout`);
    expect(e.message).toContain(
      `${FILE}:15: job "y": job[1].timeout: must be a duration string such as "10m", not number 300`,
    );
  });

  it('rejects unknown top-level fields and a job that is not an array of tables', () => {
    expect(errorOf('timzone = "UTC"\n').message).toBe(
      `cron.toml is invalid: ${FILE}:1: timzone: unknown field; cron.toml has "timezone", "timeout" and [[job]] tables`,
    );
    expect(errorOf('[job]\nname = "x"\n').message).toBe(
      `cron.toml is invalid: ${FILE}:1: job: jobs are [[job]] tables (an array of tables)`,
    );
  });
});
