// The watchdog loop alone: a real agent table and watchdog decision, a lifecycle that only
// records what it is asked, and a FakeClock driving the polls.
import { describe, expect, it } from 'vitest';
import { FakeClock } from '../../lib/clock.js';
import { silentLogger } from '../../lib/log.js';
import type { NewEvent } from '../../protocol/events.js';
import { defaultSvcdConfig, type SvcdConfig } from '../svcd-config.js';
import { type Agent, newAgent } from './agent.js';
import { AgentTable } from './agent-table.js';
import type { UnitBackend } from './backends/types.js';
import { createSupervisorEvents } from './events.js';
import type { UnitLifecycle } from './lifecycle.js';
import { createWatchdogLoop } from './watchdog-loop.js';

const S = 1000;
const T0 = Date.parse('2025-06-10T10:00:00Z');

const backend: UnitBackend = {
  kind: 'process',
  start: () => Promise.reject(new Error('not in this test')),
  probe: async () => new Map(),
  adopt: async () => null,
};

/** Units are alive while their agent id is in `alive`; a probe stamps checkedAt; restarts
 * only count and revive. */
function fakeLifecycle(clock: FakeClock) {
  const alive = new Set<string>();
  const calls: string[] = [];
  const lifecycle: UnitLifecycle = {
    launch: async () => {},
    halt: async () => {},
    bringUp: async () => {},
    reapRemoved: async () => {},
    persist: async () => {},
    async restartNow(a, reason, event) {
      calls.push(`${event} ${a.spec.id}: ${reason}`);
      a.restarts++;
      a.state = 'running';
    },
    async probe(list) {
      for (const a of list) a.checkedAt = clock.now();
      return new Map(list.map((a) => [a, alive.has(a.spec.id)]));
    },
    async remember(a, action, reason) {
      calls.push(`history ${a.spec.id}: ${action} (${reason}) at ${clock.now() - T0}`);
    },
  };
  return { lifecycle, alive, calls };
}

function setup(tune: (c: SvcdConfig) => void = () => {}) {
  const clock = new FakeClock(T0);
  let settings = defaultSvcdConfig();
  settings.watchdog = { ...settings.watchdog, pollMs: 60 * S, graceMs: 90 * S, throttleMs: 1800 * S };
  tune(settings);
  const table = new AgentTable('agents.toml');
  const a: Agent = newAgent(
    {
      id: 'web',
      runtime: 'alpha_code',
      command: null,
      cwd: null,
      env: {},
      supervise: true,
      nightlyRestart: undefined,
      pty: false,
      backend: null,
      profile: null,
      session: null,
      prompt: '',
    },
    { backend, fingerprint: 'f', nextNightlyAt: null },
  );
  a.state = 'running';
  a.unit = { backend: 'process', unit: 'svc-agent-web', pid: 1, exited: null, stop: async () => {} };
  table.set(a);
  const { lifecycle, alive, calls } = fakeLifecycle(clock);
  alive.add('web');
  const published: NewEvent[] = [];
  const log = silentLogger();
  const events = createSupervisorEvents({
    outbox: { publish: async (e) => void published.push(e) },
    nodeId: 'node_1',
    clock,
    log,
  });
  const loop = createWatchdogLoop({ clock, log, table, lifecycle, events, settings: () => settings });
  return {
    clock,
    a,
    alive,
    calls,
    published,
    loop,
    setSettings: (s: SvcdConfig) => {
      settings = s;
    },
  };
}

describe('the watchdog loop', () => {
  it('probes at every poll interval and restarts a dead supervised agent at the next poll', async () => {
    const h = setup();
    h.loop.start();
    await h.clock.advance(60 * S);
    expect(h.a.checkedAt).toBe(T0 + 60 * S);
    h.alive.delete('web');
    await h.clock.advance(59 * S);
    expect(h.calls).toEqual([]);
    await h.clock.advance(1 * S);
    expect(h.calls).toEqual(['agent.restarted web: dead']);
    await h.loop.stop();
  });

  it('gives up on an agent that dies again within the grace, once, and retries after the throttle', async () => {
    const h = setup();
    h.alive.delete('web');
    h.loop.start();
    await h.clock.advance(60 * S); // restarted; it will be dead again at every probe
    await h.clock.advance(60 * S); // within the 90 s grace: left alone
    await h.clock.advance(60 * S); // past the grace, still dead: give up until T0+60s+1800s
    await h.clock.advance(60 * S); // reported once only
    expect(h.calls).toEqual([
      'agent.restarted web: dead',
      `history web: give_up (dead again after restart; next attempt at ${new Date(T0 + 1860 * S).toISOString()}) at ${180 * S}`,
    ]);
    expect(h.a.gaveUpUntil).toBe(T0 + 1860 * S);
    expect(h.published.map((e) => [e.payload.event, e.payload.retry_at])).toEqual([
      ['agent.gave_up', new Date(T0 + 1860 * S).toISOString()],
    ]);
    await h.clock.set(T0 + 1860 * S);
    expect(h.calls.at(-1)).toBe('agent.restarted web: dead (retry after throttle)');
    await h.loop.stop();
  });

  it('leaves a paused agent and one the operator stopped alone', async () => {
    const h = setup();
    h.alive.delete('web');
    h.a.paused = true;
    await h.loop.poll();
    h.a.paused = false;
    h.a.desired = 'stopped';
    await h.loop.poll();
    expect(h.calls).toEqual([]);
  });

  it('moves the next poll to the new interval from now when a reload changes it', async () => {
    const h = setup();
    h.loop.start();
    await h.clock.advance(30 * S);
    const s = defaultSvcdConfig();
    s.watchdog = { ...s.watchdog, pollMs: 5 * S };
    h.setSettings(s);
    h.loop.reschedule();
    await h.clock.advance(5 * S);
    expect(h.a.checkedAt).toBe(T0 + 35 * S);
    await h.clock.advance(5 * S);
    expect(h.a.checkedAt).toBe(T0 + 40 * S);
    await h.loop.stop();
  });

  it('leaves no timer behind once stopped', async () => {
    const h = setup();
    h.loop.start();
    await h.clock.advance(60 * S);
    await h.loop.stop();
    expect(h.clock.pending()).toBe(0);
    await h.clock.advance(600 * S);
    expect(h.a.checkedAt).toBe(T0 + 60 * S);
  });
});
