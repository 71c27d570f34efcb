// Building cron jobs for tests without writing TOML: the same compiled schedules the parser
// makes, with the parser's defaults.

import { type CronJob, DEFAULT_BASH_TIMEOUT_MS } from '../../src/daemon/cron/config.js';
import { cronSchedule, heartbeatSchedule } from '../../src/daemon/cron/schedule.js';
import { ceilToMinutes, parseDuration } from '../../src/lib/duration.js';
import { fakeControl } from './control.js';

export interface JobSpec extends Partial<Omit<CronJob, 'schedule'>> {
  name: string;
  /** A 5-field expression, or use `every` for a heartbeat. */
  cron?: string;
  every?: string;
  tz?: string;
}

export function job(spec: JobSpec): CronJob {
  const { cron, every, tz, ...rest } = spec;
  if ((cron === undefined) === (every === undefined)) throw new Error('give cron or every');
  const schedule =
    cron !== undefined
      ? cronSchedule(cron, tz ?? 'UTC')
      : heartbeatSchedule(ceilToMinutes(parseDuration(every ?? '', { allowMs: false })));
  const dispatch = rest.dispatch ?? 'signal';
  return {
    line: 1,
    scheduleText: cron ?? null,
    intervalText: every ?? null,
    session: dispatch === 'signal' ? 'agent-1' : null,
    prompt: 'hello',
    enabled: true,
    catchUp: 'none',
    timeoutMs: dispatch === 'bash' ? DEFAULT_BASH_TIMEOUT_MS : null,
    ...rest,
    dispatch,
    schedule,
  };
}

/** Milliseconds of an ISO UTC time: at('2025-03-30T01:00Z'). */
export function at(isoText: string): number {
  const t = Date.parse(isoText);
  if (Number.isNaN(t)) throw new Error(`bad time ${isoText}`);
  return t;
}

export const MIN = 60_000;

/** cron.toml text of [[job]] tables, each given as its key lines. */
export function cronToml(...jobs: string[]): string {
  return jobs.map((j) => `[[job]]\n${j.trim()}\n`).join('\n');
}

/** The key lines of a signal job to agent-<name> with prompt "ping <name>". */
export const signalJob = (name: string, schedule: string, extra = '') =>
  `name = "${name}"\nschedule = "${schedule}"\nsession = "agent-${name}"\nprompt = "ping ${name}"\n${extra}`;

// ---------------------------------------------------------------------------------------------
// A cron component on a FakeClock with a real state.db, real mgmt.sock and real bash: what
// svcd's composition root would build, minus the other components.

import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { mgmtCall } from '../../src/cli/mgmt-client.js';
import type { DaemonContext } from '../../src/daemon/context.js';
import { type Cron, type CronDeps, createCron } from '../../src/daemon/cron/cron.js';
import { cronMethods } from '../../src/daemon/cron/methods.js';
import { registerMethods } from '../../src/daemon/mgmt/method.js';
import { MgmtServer } from '../../src/daemon/mgmt/server.js';
import { daemonPaths } from '../../src/daemon/paths.js';
import { SessionRegistry } from '../../src/daemon/secrets/index.js';
import { type OpenStateStore, openStateStore } from '../../src/daemon/state/store.js';
import { FakeClock } from '../../src/lib/clock.js';
import { silentLogger } from '../../src/lib/log.js';
import type { NewEvent } from '../../src/protocol/events.js';

export interface CronHarness {
  clock: FakeClock;
  cron: Cron;
  store: OpenStateStore;
  /** Events published to the outbox, in order. */
  events: NewEvent[];
  /** Calls of deps.signal: [target, prompt]. */
  signals: [string, string][];
  call<T>(method: string, params?: unknown): Promise<T>;
  /** Graceful stop: the component, mgmt.sock and the state.db connection. */
  stop(): Promise<void>;
  /** What kill -9 leaves: nothing stopped, timers never run again; closes only the db handle. */
  crash(): Promise<void>;
}

export interface HarnessOptions {
  /** $SVC_HOME of this test (shared by the "processes" of a restart test). */
  home: string;
  /** Wall-clock time the process starts at. */
  now: number;
  signal?: CronDeps['signal'];
  metrics?: CronDeps['metrics'];
  /** Name for the mgmt socket, so two harnesses can live at once. */
  sock?: string;
}

export function writeCronToml(home: string, text: string): string {
  const paths = daemonPaths(home);
  mkdirSync(paths.svcdDir, { recursive: true });
  writeFileSync(paths.cronToml, text);
  return paths.cronToml;
}

export async function startCron(opts: HarnessOptions): Promise<CronHarness> {
  const paths = daemonPaths(opts.home);
  mkdirSync(paths.svcdDir, { recursive: true });
  const clock = new FakeClock(opts.now);
  const store = openStateStore(paths.stateDb, clock);
  const log = silentLogger();
  const mgmt = new MgmtServer(log);
  const sock = join(paths.svcdDir, opts.sock ?? 'mgmt.sock');
  await mgmt.listen(sock);
  const events: NewEvent[] = [];
  const signals: [string, string][] = [];
  const shutdown = new AbortController();
  const ctx: DaemonContext = {
    clock,
    log,
    paths,
    identity: { node_id: 'node_test', hostname: 'test', backend_url: 'http://127.0.0.1:9', jwt: 'x' },
    env: { PATH: process.env.PATH, HOME: opts.home },
    state: store,
    tower: {
      baseUrl: 'http://127.0.0.1:9',
      request: () => Promise.reject(new Error('no tower in cron tests')),
    },
    events: {
      async publish(e) {
        events.push(e);
      },
    },
    secrets: new SessionRegistry(paths.secretsSock),
    control: fakeControl(),
    shutdown: shutdown.signal,
  };
  const cron = createCron(ctx, {
    signal:
      opts.signal ??
      (async (target, prompt) => {
        signals.push([target, prompt]);
      }),
    ...(opts.metrics ? { metrics: opts.metrics } : {}),
  });
  registerMethods(
    mgmt,
    cronMethods(cron, () => clock.now()),
  );
  await cron.start();
  let closed = false;
  return {
    clock,
    cron,
    store,
    events,
    signals,
    call: (method, params) => mgmtCall(sock, method, params),
    async stop() {
      if (closed) return;
      closed = true;
      await cron.stop();
      await mgmt.close();
      await store.close();
    },
    async crash() {
      if (closed) return;
      closed = true;
      await mgmt.close();
      await store.close();
    },
  };
}
