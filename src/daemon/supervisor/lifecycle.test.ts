// The unit lifecycle alone, on a fake backend, an in-memory store and a FakeClock: what a
// launch hands the backend, what an exit, a failed start, a halt and a probe leave behind.
import { afterEach, describe, expect, it } from 'vitest';
import { makeTempDir } from '../../../test/support/tmp.js';
import { FakeClock } from '../../lib/clock.js';
import { silentLogger } from '../../lib/log.js';
import type { NewEvent } from '../../protocol/events.js';
import type { ExitInfo } from '../process/group.js';
import { SessionRegistry } from '../secrets/sessions.js';
import { defaultSvcdConfig } from '../svcd-config.js';
import { type Agent, newAgent } from './agent.js';
import type { AgentSpec } from './agents-file.js';
import type { RunningUnit, UnitBackend, UnitLaunch } from './backends/types.js';
import { createSupervisorEvents } from './events.js';
import { createUnitLifecycle } from './lifecycle.js';
import type { AgentRow, HistoryEntry, SupervisorStore } from './store.js';

const T0 = Date.parse('2025-06-10T10:00:00Z');

/** A backend whose units live until the test ends them. */
class FakeBackend implements UnitBackend {
  readonly kind = 'process' as const;
  launches: UnitLaunch[] = [];
  failNext: Error | null = null;
  alive = new Set<string>();
  private exits: ((e: ExitInfo) => void)[] = [];
  private pid = 100;

  async start(l: UnitLaunch): Promise<RunningUnit> {
    this.launches.push(l);
    if (this.failNext) {
      const e = this.failNext;
      this.failNext = null;
      throw e;
    }
    const exited = new Promise<ExitInfo>((r) => this.exits.push(r));
    this.alive.add(l.unit);
    return {
      backend: 'process',
      unit: l.unit,
      pid: ++this.pid,
      exited,
      stop: async () => {
        this.alive.delete(l.unit);
      },
    };
  }

  /** The n-th unit started (0 = first) exits on its own. */
  exit(n: number, e: ExitInfo): void {
    this.exits[n]?.(e);
  }

  async probe(units: readonly RunningUnit[]): Promise<Map<string, boolean>> {
    return new Map(units.map((u) => [u.unit, this.alive.has(u.unit)]));
  }

  async adopt(): Promise<RunningUnit | null> {
    return null;
  }
}

class MemoryStore implements SupervisorStore {
  rows = new Map<string, AgentRow>();
  entries: HistoryEntry[] = [];
  async migrate() {}
  async all() {
    return new Map(this.rows);
  }
  async save(id: string, row: AgentRow) {
    this.rows.set(id, row);
  }
  async remove(id: string) {
    this.rows.delete(id);
  }
  async addHistory(_id: string, e: HistoryEntry) {
    this.entries.push(e);
  }
  async history() {
    return this.entries;
  }
}

const SPEC: AgentSpec = {
  id: 'worker',
  runtime: 'alpha_code',
  command: null,
  cwd: null,
  env: { EXTRA: '1' },
  supervise: true,
  nightlyRestart: undefined,
  pty: false,
  backend: null,
  profile: null,
  session: null,
  prompt: 'keep going',
};

const tmps: { remove(): void }[] = [];
afterEach(() => {
  for (const t of tmps.splice(0)) t.remove();
});

function setup() {
  const tmp = makeTempDir('svcd-lifecycle-');
  tmps.push(tmp);
  const clock = new FakeClock(T0);
  const backend = new FakeBackend();
  const store = new MemoryStore();
  const sessions = new SessionRegistry('/run/secrets.sock');
  const published: NewEvent[] = [];
  const log = silentLogger();
  const events = createSupervisorEvents({
    outbox: { publish: async (e) => void published.push(e) },
    nodeId: 'node_1',
    clock,
    log,
  });
  const lifecycle = createUnitLifecycle({
    clock,
    waits: clock,
    log,
    store,
    sessions,
    events,
    paths: { home: tmp.dir, logsDir: `${tmp.dir}/logs` },
    env: { PATH: '/usr/bin', SVC_TOKEN: 'secret' },
    self: ['node', '/opt/svcd.js'],
    settings: () => defaultSvcdConfig(),
    backends: { process: backend, tmux: backend, systemd: backend },
  });
  const agent: Agent = newAgent(SPEC, { backend, fingerprint: 'f', nextNightlyAt: null });
  return { tmp, clock, backend, store, sessions, published, lifecycle, agent };
}

describe('the unit lifecycle', () => {
  it('launches the rendered template with a fresh secrets session and records the unit', async () => {
    const { tmp, backend, store, sessions, lifecycle, agent } = setup();
    await lifecycle.launch(agent);
    const l = backend.launches[0]!;
    expect(l).toMatchObject({
      agentId: 'worker',
      unit: 'svc-agent-worker',
      argv: ['node', '/opt/svcd.js', 'reference-agent', 'keep going'],
      cwd: `${tmp.dir}/agents/worker`,
      logFile: `${tmp.dir}/logs/worker.log`,
      mode: 'plain',
    });
    expect(l.env).toMatchObject({ PATH: '/usr/bin', EXTRA: '1', SVC_SECRETS_SOCKET: '/run/secrets.sock' });
    expect(l.env.SVC_TOKEN).toBeUndefined();
    expect(sessions.resolve(l.env.SVC_SECRETS_SESSION ?? '')).toBe('worker');
    expect([agent.state, agent.startedAt, agent.unit?.pid]).toEqual(['running', T0, 101]);
    expect(store.rows.get('worker')).toEqual({
      paused: false,
      backend: 'process',
      unit: 'svc-agent-worker',
      pid: 101,
      restarts: 0,
    });
  });

  it('marks the agent dead and revokes its session when its unit exits', async () => {
    const { clock, backend, sessions, lifecycle, agent } = setup();
    await lifecycle.launch(agent);
    await clock.advance(5000);
    const unit = agent.unit as RunningUnit;
    backend.exit(0, { code: 3, signal: null });
    await unit.exited; // the lifecycle's own handler was attached first, so it has run
    expect(agent.state).toBe('dead');
    expect(agent.lastExit).toEqual({ at: T0 + 5000, code: 3, signal: null });
    expect(sessions.size).toBe(0);
  });

  it('leaves a unit that failed to start dead, with start_failed in its history, and rethrows', async () => {
    const { backend, store, sessions, lifecycle, agent } = setup();
    backend.failNext = new Error('no such program');
    await expect(lifecycle.launch(agent)).rejects.toThrow('no such program');
    expect(agent.state).toBe('dead');
    expect(sessions.size).toBe(0);
    expect(store.entries).toEqual([
      { at: '2025-06-10T10:00:00.000Z', action: 'start_failed', reason: 'no such program' },
    ]);
  });

  it('ignores the late exit of a unit it already replaced by a restart', async () => {
    const { backend, published, lifecycle, agent } = setup();
    await lifecycle.launch(agent);
    const first = agent.unit as RunningUnit;
    await lifecycle.restartNow(agent, 'manual', 'agent.restarted');
    backend.exit(0, { code: 9, signal: null });
    await first.exited;
    expect([agent.state, agent.lastExit, agent.unit?.pid]).toEqual(['running', null, 102]);
    expect([agent.restarts, agent.lastRestartReason]).toEqual([1, 'manual']);
    expect(published.map((e) => [e.payload.event, e.payload.pid, e.payload.started])).toEqual([
      ['agent.restarted', 102, true],
    ]);
  });

  it('halts a unit: stopped, session revoked, pid forgotten in state.db', async () => {
    const { backend, store, sessions, lifecycle, agent } = setup();
    await lifecycle.launch(agent);
    await lifecycle.halt(agent);
    expect([agent.state, agent.unit, agent.session]).toEqual(['stopped', null, null]);
    expect(backend.alive.size).toBe(0);
    expect(sessions.size).toBe(0);
    expect(store.rows.get('worker')?.pid).toBeNull();
  });

  it('marks a unit the probe finds gone as dead, at the probe time', async () => {
    const { clock, backend, lifecycle, agent } = setup();
    await lifecycle.launch(agent);
    backend.alive.clear();
    await clock.advance(60_000);
    const alive = await lifecycle.probe([agent]);
    expect(alive.get(agent)).toBe(false);
    expect([agent.state, agent.checkedAt, agent.lastExit]).toEqual([
      'dead',
      T0 + 60_000,
      { at: T0 + 60_000, code: null, signal: null },
    ]);
  });
});
