// mux_hosted agents on a private tmux server: signal types into the pane, the session
// outlives the supervisor and is re-adopted by the next one, stop ends the pane's tree.
import { execFileSync, spawnSync } from 'node:child_process';
import { readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { makeTestDaemonContext, type TestDaemonContext } from '../../../test/support/daemon-ctx.js';
import { waitFor } from '../../../test/support/poll.js';
import { isAlive, psGroup } from '../../../test/support/ps.js';
import { FakeClock } from '../../lib/clock.js';
import { defaultSvcdConfig } from '../config/config.js';
import { tmuxSocketOf } from './backends/tmux.js';
import { createSupervisor, type Supervisor } from './supervisor.js';

const SOCKET = `svc-test-${process.pid}-${Math.random().toString(36).slice(2, 8)}`;
const tmux = (...args: string[]) => spawnSync('tmux', ['-L', SOCKET, ...args], { encoding: 'utf8' });
const capture = (session: string) => tmux('capture-pane', '-p', '-t', `=${session}:`).stdout;

let t: TestDaemonContext | null = null;
const sups: Supervisor[] = [];

afterEach(async () => {
  for (const s of sups.splice(0)) await s.stop();
  await t?.close();
  t = null;
  tmux('kill-server');
  // tmux leaves its socket file behind when the server is killed.
  rmSync(join(process.env.TMUX_TMPDIR ?? '/tmp', `tmux-${process.getuid?.() ?? 0}`, SOCKET), { force: true });
});

function supervisor(ctx: TestDaemonContext): Supervisor {
  const config = defaultSvcdConfig();
  config.supervisor.tmuxSocket = SOCKET;
  config.supervisor.stopGraceMs = 2000;
  const s = createSupervisor(ctx.ctx, {
    config,
    userBus: false,
  });
  sups.push(s);
  return s;
}

describe('tmux backend (mux_hosted)', () => {
  it('types a signal into the pane, survives a supervisor restart and is re-adopted', async () => {
    const clock = new FakeClock(Date.parse('2025-06-10T10:00:00Z'));
    t = await makeTestDaemonContext({ clock });
    writeFileSync(
      t.ctx.paths.agentsToml,
      '[[agent]]\nid = "pane"\nruntime = "mux_hosted"\nsession = "main"\nprofile = "desk"\n',
    );
    const first = supervisor(t);
    await first.start();
    const s1 = first.listAgents()[0]!;
    expect(s1).toMatchObject({
      id: 'pane',
      backend: 'tmux',
      unit: 'main',
      state: 'running',
      tmux: { socket: SOCKET, session: 'main' },
    });
    const panePid = s1.pid as number;
    expect(tmux('list-sessions', '-F', '#{session_name}').stdout).toBe('main\n');
    await waitFor('the agent to be ready', () => capture('main').includes('reference agent ready'));

    const r = await first.signal('desk', 'hello pane; $HOME "quoted";');
    expect(r).toMatchObject({ agent_id: 'pane', delivery: 'send_keys', done: true, ok: true });
    await waitFor('the answer in the pane', () =>
      capture('main').includes('echo: hello pane; $HOME "quoted";'),
    );
    // The pane's output is also in the agent's rotating log (pipe-pane → svcd log-pipe).
    await waitFor('the log', () => readFileSync(s1.log_file as string, 'utf8').includes('echo: hello pane'));
    // The secrets session reached the pane's process, without showing in any argv.
    const env = readFileSync(`/proc/${panePid}/environ`, 'utf8').split('\0');
    expect(env).toContain(`SVC_SECRETS_SOCKET=${t.ctx.paths.secretsSock}`);
    expect(env.some((e) => /^SVC_SECRETS_SESSION=.{43}$/.test(e))).toBe(true);
    const session = env.find((e) => e.startsWith('SVC_SECRETS_SESSION='))!.split('=')[1]!;
    expect(execFileSync('ps', ['-e', '-o', 'args='], { encoding: 'utf8' })).not.toContain(session);

    await first.stop();
    sups.length = 0;
    expect(isAlive(panePid)).toBe(true);

    t.ctx.mgmt = { register() {} };
    const second = supervisor(t);
    await second.start();
    const s2 = await second.agentStatus('pane');
    expect(s2).toMatchObject({ state: 'running', pid: panePid, restarts: 0 });
    expect(s2.history?.map((h) => h.action)).toEqual(['adopted']);
    await second.signal('pane', 'after restart');
    await waitFor('the answer after re-adoption', () => capture('main').includes('echo: after restart'));
  });

  it('restarts a pane whose agent died at the next poll, and stop ends its process tree', async () => {
    const clock = new FakeClock(Date.parse('2025-06-10T10:00:00Z'));
    t = await makeTestDaemonContext({ clock });
    writeFileSync(
      t.ctx.paths.agentsToml,
      '[[agent]]\nid = "pane"\nruntime = "mux_hosted"\ncommand = ["sh", "-c", "sleep 600 & sleep 600 & wait"]\n',
    );
    const sup = supervisor(t);
    await sup.start();
    const pid = sup.listAgents()[0]?.pid as number;
    await waitFor('the grandchildren', () => psGroup(pid).length === 3);
    process.kill(pid, 'SIGKILL');
    await waitFor('the session to end', () => tmux('has-session', '-t', '=pane').status !== 0);
    await sup.poll();
    const s = sup.listAgents()[0]!;
    expect(s).toMatchObject({ state: 'running', restarts: 1, last_restart_reason: 'dead' });
    expect(s.pid).not.toBe(pid);
    const next = s.pid as number;
    await waitFor('the new grandchildren', () => psGroup(next).length === 3);
    await sup.stopAgent('pane');
    expect(psGroup(next)).toEqual([]);
    expect(tmux('has-session', '-t', '=pane').status).toBe(1);
    await expect(sup.signal('pane', 'x')).rejects.toMatchObject({ code: 'agent_not_running' });
  });
});

describe('tmux socket per SVC_HOME', () => {
  const homes: TestDaemonContext[] = [];
  afterEach(async () => {
    for (const h of homes.splice(0)) {
      spawnSync('tmux', ['-L', tmuxSocketOf(h.home), 'kill-server']);
      rmSync(
        join(process.env.TMUX_TMPDIR ?? '/tmp', `tmux-${process.getuid?.() ?? 0}`, tmuxSocketOf(h.home)),
        {
          force: true,
        },
      );
      await h.close();
    }
  });

  it('gives each SVC_HOME its own tmux server, so two installs can both run a session "desk"', async () => {
    const started: Supervisor[] = [];
    for (let i = 0; i < 2; i++) {
      const h = await makeTestDaemonContext({ clock: new FakeClock(Date.parse('2025-06-10T10:00:00Z')) });
      homes.push(h);
      writeFileSync(h.ctx.paths.agentsToml, '[[agent]]\nid = "desk"\nruntime = "mux_hosted"\n');
      const config = defaultSvcdConfig();
      config.supervisor.stopGraceMs = 2000;
      const s = createSupervisor(h.ctx, { config, userBus: false });
      sups.push(s);
      await s.start();
      started.push(s);
    }
    const [a, b] = started.map((s) => s.listAgents()[0]);
    const [ha, hb] = homes.map((h) => h.home);
    expect(a).toMatchObject({
      state: 'running',
      tmux: { socket: tmuxSocketOf(ha as string), session: 'desk' },
    });
    expect(b).toMatchObject({
      state: 'running',
      tmux: { socket: tmuxSocketOf(hb as string), session: 'desk' },
    });
    expect(tmuxSocketOf(ha as string)).not.toBe(tmuxSocketOf(hb as string));
    expect(tmuxSocketOf(ha as string)).toMatch(/^svc-[0-9a-f]{12}$/);
    expect(a?.pid).not.toBe(b?.pid);
  });
});
