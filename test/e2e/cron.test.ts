// End to end: a real `svcd run` dispatching cron.toml jobs to real bash, driven and inspected
// through the real `svc agent cron …` CLI, including a kill -9 right after the dedup write.
//
// Time: no test waits for a real minute boundary. svcd reads SVC_TEST_CLOCK_OFFSET_MS at its
// CLI edge (test-only, documented in docs/cron.md) and shifts its whole clock by it, so a
// test picks the daemon's time: "a few seconds before 10:01" or "20 s into 10:00". Timers
// still run at real speed, and nothing in svcd knows it is being tested. Each test computes
// the offset once and reuses it for a restart, so both processes share one timeline. Every
// wait is a poll with a deadline (test/support/poll.ts).
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { CronHistory, CronList } from '../../src/protocol/cron.js';
import { waitFor } from '../support/poll.js';
import { type Proc, run, SVC_BIN, SVCD_BIN, spawnProc, stopAll } from '../support/procs.js';
import { makeTempDir } from '../support/tmp.js';

let tmp: { dir: string; remove(): void };
/** Process groups of bash jobs orphaned by kill -9, killed in cleanup. */
let orphanGroups: number[] = [];

beforeEach(() => {
  tmp = makeTempDir('svc-e2e-cron-');
  orphanGroups = [];
  writeFileSync(
    join(tmp.dir, 'node.json'),
    JSON.stringify({ node_id: 'node_e2e', hostname: 'e2e', backend_url: 'http://127.0.0.1:9', jwt: 'x' }),
    { mode: 0o600 },
  );
});

afterEach(async () => {
  await stopAll();
  for (const pgid of orphanGroups) {
    try {
      process.kill(-pgid, 'SIGKILL');
    } catch {
      // already gone
    }
  }
  tmp.remove();
});

function env(offsetMs: number): NodeJS.ProcessEnv {
  return {
    PATH: process.env.PATH,
    HOME: tmp.dir,
    SVC_HOME: tmp.dir,
    SVC_NODE_FILE: join(tmp.dir, 'node.json'),
    // Nothing listens there: the event outbox keeps retrying, which cron does not mind.
    SVC_BASE_URL: 'http://127.0.0.1:9',
    SVC_TEST_CLOCK_OFFSET_MS: String(offsetMs),
  };
}

/** The offset that makes svcd's clock read `daemonIso` right now. */
function offsetFor(daemonIso: string): number {
  return Date.parse(daemonIso) - Date.now();
}

function startSvcd(offsetMs: number): Proc {
  return spawnProc(SVCD_BIN, ['run', '--log-level', 'warn'], env(offsetMs));
}

async function svc(
  offsetMs: number,
  ...args: string[]
): Promise<{ code: number | string; out: string; err: string }> {
  const r = await run(SVC_BIN, args, env(offsetMs));
  return { code: r.code, out: r.stdout, err: r.stderr };
}

async function svcJson<T>(offsetMs: number, ...args: string[]): Promise<T> {
  const r = await svc(offsetMs, ...args, '--json');
  if (r.code !== 0) throw new Error(`svc ${args.join(' ')} failed (${r.code}): ${r.err}`);
  return JSON.parse(r.out) as T;
}

function cronToml(text: string): string {
  const file = join(tmp.dir, 'svcd', 'cron.toml');
  mkdirSync(join(tmp.dir, 'svcd'), { recursive: true });
  writeFileSync(file, text);
  return file;
}

function lines(file: string): string[] {
  return existsSync(file) ? readFileSync(file, 'utf8').split('\n').filter(Boolean) : [];
}

describe('svcd cron end to end', () => {
  it('runs a bash job at startup and at the next minute boundary, and the CLI reports it', async () => {
    const log = join(tmp.dir, 'fires.log');
    const file = cronToml(
      `[[job]]\nname = "stamp"\nschedule = "* * * * *"\ndispatch = "bash"\nprompt = 'echo "$SVC_CRON_SCHEDULED_MINUTE" >> ${log}; echo done'\n`,
    );
    // A few seconds before 10:01 on the daemon's clock: the start-up tick fires 10:00, the
    // timer then fires 10:01 (a slow start only shifts both by a minute).
    const offset = offsetFor('2031-01-06T10:00:55Z');
    const svcd = startSvcd(offset);
    const fired = await waitFor('two fires', () => (lines(log).length >= 2 ? lines(log) : null), {
      timeoutMs: 90_000,
    });
    const [first, second] = fired.map((l) => Date.parse(l));
    expect((second ?? 0) - (first ?? 0)).toBe(60_000);

    const history = await waitFor('both outcomes recorded', async () => {
      const h = await svcJson<CronHistory>(offset, 'agent', 'cron', 'history', 'stamp');
      return h.items.length >= 2 && h.items.every((f) => f.outcome === 'ok') ? h : null;
    });
    expect(
      history.items.slice(0, 2).map((f) => [f.scheduled_minute, f.outcome, f.exit_code, f.output_tail]),
    ).toEqual([
      [fired[1], 'ok', 0, 'done\n'],
      [fired[0], 'ok', 0, 'done\n'],
    ]);

    const list = await svcJson<CronList>(offset, 'agent', 'cron', 'list');
    expect(list.jobs.map((j) => [j.name, j.dispatch, j.enabled])).toEqual([['stamp', 'bash', true]]);
    expect(Date.parse(list.jobs[0]?.next_fire ?? '')).toBeGreaterThan(Date.parse(fired[1] ?? ''));

    const human = await svc(offset, 'agent', 'cron', 'describe', 'stamp');
    expect(human.code).toBe(0);
    expect(human.out).toMatch(/missed minutes: +Minutes missed while svcd is down are not caught up/);

    expect((await svc(offset, 'agent', 'cron', 'gc-now')).out.trim()).toMatch(
      /^removed 0 dedup keys older than 24 h \(before 2031-01-0\dT10:0\d:\d\d\.\d{3}Z\)$/,
    );

    writeFileSync(file, `[[job]]\nname = "stamp"\nschedule = "* * * * *"\ndispatch = "ssh"\nprompt = "x"\n`);
    const bad = await svc(offset, 'agent', 'cron', 'reload');
    expect(bad.code).toBe(78);
    expect(bad.err.trim()).toBe(
      `svc: error: cron.toml is invalid: ${file}:4: job "stamp": job[0].dispatch: unknown dispatch "ssh": use "signal" (default) or "bash" [config_invalid]`,
    );
    expect((await svcJson<CronList>(offset, 'agent', 'cron', 'list')).jobs.map((j) => j.dispatch)).toEqual([
      'bash',
    ]);

    svcd.kill('SIGTERM');
    expect(await svcd.exited).toBe(0);
  });

  it('does not fire again after kill -9 right after the dedup write and a restart in the same minute', async () => {
    const log = join(tmp.dir, 'fires.log');
    cronToml(
      `[[job]]\nname = "once"\nschedule = "0 10 * * *"\ndispatch = "bash"\nprompt = 'echo "$SVC_CRON_SCHEDULED_MINUTE $$" >> ${log}; exec sleep 300'\n`,
    );
    // 20 s into 10:00 on the daemon's clock: the start-up tick claims 10:00 and dispatches.
    const offset = offsetFor('2031-01-06T10:00:20Z');
    const first = startSvcd(offset);
    const [line] = await waitFor('the job to start', () => (lines(log).length > 0 ? lines(log) : null));
    first.kill('SIGKILL');
    expect(await first.exited).toBe('SIGKILL');
    const [minute, pid] = (line ?? '').split(' ');
    expect(minute).toBe('2031-01-06T10:00:00.000Z');
    orphanGroups.push(Number(pid));

    // The dedup key was durable before the job started, and survives the kill.
    const db = new Database(join(tmp.dir, 'svcd', 'state.db'), { readonly: true });
    try {
      expect(db.prepare('select job, minute from cron_dedup').all()).toEqual([
        { job: 'once', minute: Date.parse('2031-01-06T10:00:00Z') },
      ]);
    } finally {
      db.close();
    }

    const second = startSvcd(offset);
    const list = await waitFor('the restarted svcd to tick 10:00', async () => {
      const l = await svcJson<CronList>(offset, 'agent', 'cron', 'list');
      return l.last_tick === '2031-01-06T10:00:00.000Z' ? l : null;
    });
    expect(list.jobs.map((j) => j.name)).toEqual(['once']);
    expect(lines(log)).toEqual([line]);
    const history = await svcJson<CronHistory>(offset, 'agent', 'cron', 'history', 'once');
    expect(history.items.map((f) => [f.scheduled_minute, f.outcome, f.detail])).toEqual([
      [
        '2031-01-06T10:00:00.000Z',
        'interrupted',
        'svcd exited while this fire was running; its outcome is unknown',
      ],
    ]);
    second.kill('SIGTERM');
    expect(await second.exited).toBe(0);
  });
});
