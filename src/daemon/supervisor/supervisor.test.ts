// The supervisor in-process with real processes and a FakeClock driving the watchdog:
// kill -9 → restart at the next poll, grace and throttle to the second, pause/resume,
// process trees, nightly restarts across DST, ACP progress, reload of a bad agents.toml.
import { readFileSync, writeFileSync } from 'node:fs';
import { afterEach, describe, expect, it } from 'vitest';
import { makeTestDaemonContext, type TestDaemonContext } from '../../../test/support/daemon-ctx.js';
import { waitFor } from '../../../test/support/poll.js';
import { isAlive, psGroup } from '../../../test/support/ps.js';
import { FakeClock } from '../../lib/clock.js';
import type { AgentStatus } from '../../protocol/agents.js';
import { isSvcError } from '../../protocol/errors.js';
import type { SessionRegistry } from '../secrets/index.js';
import { defaultSvcdConfig, loadSvcdConfig, type SvcdConfig } from '../svcd-config.js';
import { agentMethods } from './methods.js';
import { createSupervisor, type Supervisor } from './supervisor.js';

const S = 1000;
const T0 = Date.parse('2025-06-10T10:00:00Z');

interface Harness {
  t: TestDaemonContext;
  clock: FakeClock;
  sup: Supervisor;
  sessions: SessionRegistry;
}

let open: Harness[] = [];

async function harness(
  agentsToml: string,
  tune: (c: SvcdConfig) => void = () => {},
  start = T0,
  /** agent.reload re-reads $SVC_HOME/svcd/config.toml, as in svcd (default: keeps the first). */
  rereadConfig = false,
): Promise<Harness> {
  const clock = new FakeClock(start);
  const t = await makeTestDaemonContext({ clock });
  writeFileSync(t.ctx.paths.agentsToml, agentsToml);
  const config = defaultSvcdConfig();
  config.supervisor.stopGraceMs = 2000;
  tune(config);
  const sessions = t.ctx.secrets as SessionRegistry;
  const sup = createSupervisor(t.ctx, {
    config,
    userBus: false,
    ...(rereadConfig ? { reloadConfig: () => loadSvcdConfig(t.ctx.paths.configToml) } : {}),
  });
  t.register(agentMethods(sup));
  await sup.start();
  const h = { t, clock, sup, sessions };
  open.push(h);
  return h;
}

afterEach(async () => {
  for (const h of open) {
    await h.sup.stop();
    await h.t.close();
  }
  open = [];
});

const status = (h: Harness, id: string): AgentStatus => {
  const s = h.sup.listAgents().find((a) => a.id === id);
  if (!s) throw new Error(`no agent ${id}`);
  return s;
};

const matrix = (h: Harness) =>
  h.t.events
    .filter((e) => e.type === 'matrix')
    .map((e) => [e.payload.event, e.payload.agent_id, e.payload.reason]);

const SLEEPER = `
[[agent]]
id = "sleeper"
runtime = "alpha_code"
supervise = true
command = ["sleep", "600"]
`;

describe('supervisor with the process backend', () => {
  it('restarts a kill -9ed agent at the next watchdog poll', async () => {
    const h = await harness(SLEEPER);
    const first = status(h, 'sleeper');
    expect(first).toMatchObject({
      state: 'running',
      backend: 'process',
      unit: 'svc-agent-sleeper',
      restarts: 0,
    });
    const pid = first.pid as number;
    process.kill(pid, 'SIGKILL');
    await waitFor('the exit to be seen', () => status(h, 'sleeper').state === 'dead');
    expect(status(h, 'sleeper').last_exit).toMatchObject({ code: null, signal: 'SIGKILL' });

    await h.clock.advance(59 * S);
    expect(status(h, 'sleeper')).toMatchObject({ state: 'dead', restarts: 0 });
    await h.clock.advance(1 * S);
    const after = await waitFor('the restart', () => {
      const s = status(h, 'sleeper');
      return s.state === 'running' && s.restarts === 1 ? s : null;
    });
    expect(after.pid).not.toBe(pid);
    expect(isAlive(after.pid as number)).toBe(true);
    expect(after).toMatchObject({
      last_restart_reason: 'dead',
      last_restart_at: new Date(T0 + 60 * S).toISOString(),
    });
    expect(matrix(h)).toEqual([['agent.restarted', 'sleeper', 'dead']]);
    const ev = h.t.events[0]!;
    expect(ev).toMatchObject({ type: 'matrix', agent_id: 'sleeper', status: null });
    expect(ev.payload).toMatchObject({
      node_id: 'node_test',
      runtime: 'alpha_code',
      backend: 'process',
      restarts: 1,
      started: true,
    });
    expect((await h.sup.agentStatus('sleeper')).history).toEqual([
      { at: new Date(T0 + 60 * S).toISOString(), action: 'restart', reason: 'dead' },
    ]);
  });

  it('honours the 90 s grace and the 30 min throttle to the second', async () => {
    // Polls are made by hand at exact seconds; the timer's own polls are kept out of the way.
    const h = await harness(SLEEPER, (c) => {
      c.watchdog.pollMs = 24 * 3600 * S;
    });
    const kill = async () => {
      process.kill(status(h, 'sleeper').pid as number, 'SIGKILL');
      await waitFor('the exit', () => status(h, 'sleeper').state === 'dead');
    };
    const pollAt = async (offset: number) => {
      await h.clock.set(T0 + offset);
      await h.sup.poll();
    };
    await kill();
    await pollAt(10 * S); // first death: restarted at once
    expect(status(h, 'sleeper')).toMatchObject({ state: 'running', restarts: 1 });
    await kill(); // dies again right after its restart
    await pollAt(10 * S + 89 * S);
    expect(status(h, 'sleeper')).toMatchObject({ state: 'dead', restarts: 1, gave_up_until: null });
    await pollAt(10 * S + 90 * S);
    expect(status(h, 'sleeper')).toMatchObject({
      state: 'dead',
      restarts: 1,
      gave_up_until: new Date(T0 + 10 * S + 1800 * S).toISOString(),
    });
    await pollAt(10 * S + 1799 * S);
    expect(status(h, 'sleeper')).toMatchObject({ state: 'dead', restarts: 1 });
    await pollAt(10 * S + 1800 * S);
    expect(status(h, 'sleeper')).toMatchObject({ state: 'running', restarts: 2, gave_up_until: null });
    expect(matrix(h)).toEqual([
      ['agent.restarted', 'sleeper', 'dead'],
      ['agent.gave_up', 'sleeper', 'dead again after restart'],
      ['agent.restarted', 'sleeper', 'dead (retry after throttle)'],
    ]);
    expect(h.t.events[1]?.payload.retry_at).toBe(new Date(T0 + 1810 * S).toISOString());
  });

  it('does not restart a paused agent, and restarts it once resumed', async () => {
    const h = await harness(SLEEPER);
    await h.t.call('agent.pause', { id: 'sleeper' });
    process.kill(status(h, 'sleeper').pid as number, 'SIGKILL');
    await waitFor('the exit', () => status(h, 'sleeper').state === 'dead');
    await h.clock.set(T0 + 5 * 60 * S);
    await h.sup.poll();
    expect(status(h, 'sleeper')).toMatchObject({ state: 'dead', paused: true, restarts: 0 });
    const resumed = await h.t.call<AgentStatus>('agent.resume', { id: 'sleeper' });
    expect(resumed.paused).toBe(false);
    await h.sup.poll();
    expect(status(h, 'sleeper')).toMatchObject({ state: 'running', paused: false, restarts: 1 });
    expect((await h.sup.agentStatus('sleeper')).history?.map((e) => e.action)).toEqual([
      'pause',
      'resume',
      'restart',
    ]);
  });

  it('keeps an agent paused across a supervisor restart', async () => {
    const h = await harness(SLEEPER);
    await h.sup.pauseAgent('sleeper');
    await h.sup.stop();
    open = open.filter((x) => x !== h);
    const again = createSupervisor(h.t.ctx, { config: defaultSvcdConfig(), userBus: false });
    await again.start();
    try {
      expect(again.listAgents()[0]).toMatchObject({ id: 'sleeper', paused: true, state: 'running' });
    } finally {
      await again.stop();
      await h.t.close();
    }
  });

  it('leaves no process of the group alive when stopping an agent that forked grandchildren', async () => {
    const h = await harness(`
[[agent]]
id = "forker"
runtime = "alpha_code"
supervise = true
command = ["sh", "-c", "sleep 600 & sleep 600 & (trap '' TERM; sleep 600) & wait"]
`);
    const pid = status(h, 'forker').pid as number;
    await waitFor('the grandchildren', () => psGroup(pid).length === 4);
    const stopped = await h.t.call<AgentStatus>('agent.stop', { id: 'forker' });
    expect(stopped).toMatchObject({ state: 'stopped', pid: null });
    expect(psGroup(pid)).toEqual([]);
    // Stopped by the operator: the watchdog leaves it alone.
    await h.clock.advance(120 * S);
    await h.sup.poll();
    expect(status(h, 'forker').state).toBe('stopped');
  });

  it('clears what a killed agent left in its group before restarting it', async () => {
    const h = await harness(`
[[agent]]
id = "forker"
runtime = "alpha_code"
supervise = true
command = ["sh", "-c", "sleep 600 & sleep 600 & wait"]
`);
    const pid = status(h, 'forker').pid as number;
    await waitFor('the grandchildren', () => psGroup(pid).length === 3);
    process.kill(pid, 'SIGKILL');
    await waitFor('the exit', () => status(h, 'forker').state === 'dead');
    expect(psGroup(pid).length).toBe(2); // orphaned grandchildren
    await h.sup.poll();
    expect(status(h, 'forker')).toMatchObject({ state: 'running', restarts: 1 });
    expect(psGroup(pid)).toEqual([]);
  });

  it('mints a secrets session per run and revokes it when the agent dies', async () => {
    const h = await harness(SLEEPER);
    const sessionOf = (pid: number) =>
      readFileSync(`/proc/${pid}/environ`, 'utf8')
        .split('\0')
        .find((e) => e.startsWith('SVC_SECRETS_SESSION='))
        ?.slice('SVC_SECRETS_SESSION='.length) ?? '';
    expect(h.sessions.size).toBe(1);
    const pid = status(h, 'sleeper').pid as number;
    const before = sessionOf(pid);
    expect(h.sessions.resolve(before)).toBe('sleeper');
    process.kill(pid, 'SIGKILL');
    await waitFor('the revocation', () => h.sessions.size === 0);
    expect(h.sessions.resolve(before)).toBeNull();
    await h.sup.poll();
    expect(h.sessions.size).toBe(1);
    const after = sessionOf(status(h, 'sleeper').pid as number);
    expect(after).not.toBe(before);
    expect(h.sessions.resolve(after)).toBe('sleeper');
  });

  it('restarts an agent on request, with grace after it', async () => {
    const h = await harness(SLEEPER);
    const pid = status(h, 'sleeper').pid as number;
    const s = await h.t.call<AgentStatus>('agent.restart', { id: 'sleeper' });
    expect(s).toMatchObject({ state: 'running', restarts: 1, last_restart_reason: 'manual' });
    expect(s.pid).not.toBe(pid);
    expect(psGroup(pid)).toEqual([]);
    expect(matrix(h)).toEqual([['agent.restarted', 'sleeper', 'manual']]);
  });

  it('answers unknown agents with agent_not_found', async () => {
    const h = await harness(SLEEPER);
    await expect(h.t.call('agent.status', { id: 'nope' })).rejects.toMatchObject({ code: 'agent_not_found' });
    await expect(h.t.call('agent.status', {})).rejects.toMatchObject({ code: 'validation_failed' });
  });
});

describe('nightly restart', () => {
  const NIGHTLY = `
[[agent]]
id = "sleeper"
runtime = "alpha_code"
supervise = true
command = ["sleep", "600"]
nightly_restart = "02:30"
`;
  const zone = (c: SvcdConfig) => {
    c.watchdog.timezone = 'Europe/Berlin';
  };

  it('restarts at 03:00 local on the night 02:30 does not exist (spring forward), then at 02:30', async () => {
    const h = await harness(NIGHTLY, zone, Date.parse('2025-03-29T12:00:00Z'));
    expect(status(h, 'sleeper').next_nightly_restart_at).toBe('2025-03-30T01:00:00.000Z');
    await h.clock.set(Date.parse('2025-03-30T00:59:59Z'));
    await h.sup.poll();
    expect(status(h, 'sleeper').restarts).toBe(0);
    await h.clock.set(Date.parse('2025-03-30T01:00:00Z'));
    await h.sup.poll();
    expect(status(h, 'sleeper')).toMatchObject({
      restarts: 1,
      state: 'running',
      last_restart_reason: 'nightly',
      next_nightly_restart_at: '2025-03-31T00:30:00.000Z',
    });
    expect(matrix(h)).toEqual([['agent.nightly_restart', 'sleeper', 'nightly']]);
  });

  it('restarts once on the night 02:30 happens twice (fall back)', async () => {
    const h = await harness(NIGHTLY, zone, Date.parse('2025-10-25T12:00:00Z'));
    expect(status(h, 'sleeper').next_nightly_restart_at).toBe('2025-10-26T00:30:00.000Z');
    await h.clock.set(Date.parse('2025-10-26T00:30:00Z'));
    await h.sup.poll();
    expect(status(h, 'sleeper').restarts).toBe(1);
    // 02:30 CET (the second 02:30 of the night), past the grace: no second restart.
    await h.clock.set(Date.parse('2025-10-26T01:30:00Z'));
    await h.sup.poll();
    expect(status(h, 'sleeper')).toMatchObject({
      restarts: 1,
      next_nightly_restart_at: '2025-10-27T01:30:00.000Z',
    });
    expect(matrix(h)).toEqual([['agent.nightly_restart', 'sleeper', 'nightly']]);
  });
});

describe('supervised ACP agent', () => {
  it('answers a signal on its session and reports progress as feed events', async () => {
    const h = await harness(`
[[agent]]
id = "reviewer"
runtime = "alpha_agent_acp"
profile = "review"
`);
    expect(status(h, 'reviewer')).toMatchObject({ state: 'running', backend: 'process' });
    const r = await h.sup.signal('review', 'progress: 1\nrun: echo reviewed', { wait: true });
    expect(r).toMatchObject({
      agent_id: 'reviewer',
      runtime: 'alpha_agent_acp',
      delivery: 'acp_prompt',
      done: true,
      ok: true,
      stop_reason: 'end_turn',
      failure: null,
      summary: 'made 1 progress steps\nreviewed',
    });
    const progress = h.t.events.filter((e) => e.type === 'progress');
    expect(progress.map((e) => [e.agent_id, e.payload.kind, e.payload.text])).toEqual([
      ['reviewer', 'thought', 'step 1 of 1\n'],
      ['reviewer', 'message', 'made 1 progress steps\n'],
      ['reviewer', 'tool_call', 'run: echo reviewed'],
      ['reviewer', 'tool_call_update', 'reviewed\n'],
      ['reviewer', 'message', 'reviewed\n'],
    ]);
    expect(new Set(progress.map((e) => e.payload.run_id))).toEqual(new Set([r.run_id]));
    expect(progress[0]?.payload).toMatchObject({ node_id: 'node_test', session_id: 'ref-1' });

    const failed = await h.sup.signal('reviewer', 'fail: bad input', { wait: true });
    expect(failed).toMatchObject({ ok: false, failure: 'agent error: bad input', stop_reason: null });
    const queued = await h.sup.signal('reviewer', 'hello');
    expect(queued).toMatchObject({ delivery: 'acp_prompt', done: false, ok: null });
  });

  it('refuses a signal while the ACP agent is down', async () => {
    const h = await harness(`
[[agent]]
id = "reviewer"
runtime = "alpha_agent_acp"
`);
    await h.sup.signal('reviewer', 'exit: 3');
    await waitFor('the crash', () => status(h, 'reviewer').state === 'dead');
    expect(status(h, 'reviewer').last_exit).toMatchObject({ code: 3, signal: null });
    await expect(h.sup.signal('reviewer', 'hi')).rejects.toMatchObject({ code: 'agent_not_running' });
  });
});

describe('signal to CLI kinds', () => {
  it('starts a new one-shot run of the agent with the prompt', async () => {
    const h = await harness(`
[[agent]]
id = "oneshot"
runtime = "gamma_cli"
profile = "nightly-report"
prompt = "default prompt"
`);
    expect(status(h, 'oneshot')).toMatchObject({ state: 'stopped', supervise: false });
    const r = await h.t.call('agent.signal', { target: 'nightly-report', wait: true });
    expect(r).toMatchObject({
      agent_id: 'oneshot',
      delivery: 'one_shot',
      done: true,
      ok: true,
      exit_code: 0,
    });
    expect((r as { summary: string }).summary).toContain('echo: default prompt');
    const failed = await h.t.call('agent.signal', { target: 'oneshot', prompt: 'fail: nope', wait: true });
    expect(failed).toMatchObject({ ok: false, exit_code: 1, failure: 'exit code 1' });
    await expect(h.t.call('agent.signal', { target: 'ghost', prompt: 'x' })).rejects.toMatchObject({
      code: 'agent_not_found',
    });
  });
});

describe('reload', () => {
  it('keeps running agents untouched when agents.toml is invalid, naming file and line', async () => {
    const h = await harness(SLEEPER);
    const pid = status(h, 'sleeper').pid;
    const bad = [
      [
        '[[agent]]\nid = "sleeper"\nruntime = "alpha_code"\ncommand = ["sleep", 600]\n',
        ':4: agent[0].command[1]: must be a string',
      ],
      ['[[agent]]\nid = "x"\nruntime = "alpha_code\n', ':3:'],
      ['[[agent]]\nid = "x"\nruntime = "omega"\n', ':3: agent[0].runtime: unknown runtime "omega"'],
      [
        '[[agent]]\nid = "x"\nruntime = "beta_cli"\n[[agent]]\nid = "x"\nruntime = "beta_cli"\n',
        ':5: agent[1].id: duplicate id "x" (first defined on line 2)',
      ],
    ];
    for (const [text, where] of bad) {
      writeFileSync(h.t.ctx.paths.agentsToml, text as string);
      const err = await h.t.call('agent.reload').catch((e: unknown) => e);
      expect(isSvcError(err) && err.code).toBe('config_invalid');
      expect((err as Error).message).toContain(`${h.t.ctx.paths.agentsToml}${where}`);
    }
    expect(h.sup.listAgents().map((a) => [a.id, a.state, a.pid])).toEqual([['sleeper', 'running', pid]]);
  });

  it('starts added agents, stops removed ones and restarts changed ones', async () => {
    const h = await harness(`${SLEEPER}
[[agent]]
id = "gone"
runtime = "alpha_code"
supervise = true
command = ["sleep", "601"]
`);
    const sleeperPid = status(h, 'sleeper').pid as number;
    const gonePid = status(h, 'gone').pid as number;
    writeFileSync(
      h.t.ctx.paths.agentsToml,
      `${SLEEPER.replace('"600"', '"602"')}
[[agent]]
id = "new"
runtime = "alpha_code"
supervise = true
command = ["sleep", "603"]
`,
    );
    expect(await h.t.call('agent.reload')).toEqual({
      added: ['new'],
      removed: ['gone'],
      changed: ['sleeper'],
      unchanged: [],
    });
    expect(h.sup.listAgents().map((a) => [a.id, a.state])).toEqual([
      ['new', 'running'],
      ['sleeper', 'running'],
    ]);
    expect(psGroup(gonePid)).toEqual([]);
    expect(psGroup(sleeperPid)).toEqual([]);
    expect(await h.t.call('agent.reload')).toEqual({
      added: [],
      removed: [],
      changed: [],
      unchanged: ['sleeper', 'new'],
    });
  });
  it('re-reads config.toml: an invalid file leaves the old one in force, naming file, line and field', async () => {
    const h = await harness(SLEEPER, () => {}, T0, true);
    const file = h.t.ctx.paths.configToml;
    const pid = status(h, 'sleeper').pid;
    writeFileSync(file, '[watchdog]\nnightly_restart = "03:00"\ntimezone = "UTC"\n');
    expect(await h.t.call('agent.reload')).toEqual({
      added: [],
      removed: [],
      changed: [],
      unchanged: ['sleeper'],
    });
    expect(status(h, 'sleeper')).toMatchObject({ pid, next_nightly_restart_at: '2025-06-11T03:00:00.000Z' });

    writeFileSync(file, '[watchdog]\nnightly_restart = "04:00"\ntimezone = "UTC"\npoll = 60\n');
    const err = await h.t.call('agent.reload').catch((e: unknown) => e);
    expect(isSvcError(err) && [err.code, err.message]).toEqual([
      'config_invalid',
      `${file}:4: watchdog.poll: must be a string, got number 60`,
    ]);
    expect(status(h, 'sleeper')).toMatchObject({ pid, next_nightly_restart_at: '2025-06-11T03:00:00.000Z' });

    // A new template for its runtime kind restarts the agent; the watchdog is back to defaults.
    writeFileSync(file, '[runtime.alpha_code]\ncommand = ["sleep", "{prompt}"]\n');
    expect(await h.t.call('agent.reload')).toEqual({
      added: [],
      removed: [],
      changed: ['sleeper'],
      unchanged: [],
    });
    const after = status(h, 'sleeper');
    expect(after).toMatchObject({ state: 'running', next_nightly_restart_at: null });
    expect(after.pid).not.toBe(pid);
  });
});
