// The systemd backend against a fake `systemctl` on PATH (containers have no user bus): the
// right unit names and arguments, the unit file, probing, restart, stop and re-adoption.
import { chmodSync, existsSync, mkdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { makeTestDaemonContext, type TestDaemonContext } from '../../../test/support/daemon-ctx.js';
import { makeTempDir } from '../../../test/support/tmp.js';
import { FakeClock } from '../../lib/clock.js';
import { defaultSvcdConfig } from '../svcd-config.js';
import { chooseBackend } from './agent.js';
import type { AgentSpec } from './agents-file.js';
import { systemdQuote } from './backends/systemd.js';
import { createSupervisor, type Supervisor } from './supervisor.js';

const FAKE_SYSTEMCTL = `#!/bin/sh
# Records every call; keeps unit states in files; answers like systemctl --user would.
echo "$*" >> "$FAKE_SYSTEMCTL_LOG"
[ "$1" = "--user" ] || { echo "fake systemctl: only --user is supported" >&2; exit 2; }
shift
cmd="$1"; shift
case "$cmd" in
  daemon-reload) ;;
  start|restart) for u in "$@"; do echo active > "$FAKE_SYSTEMCTL_STATE/$u"; done ;;
  stop) for u in "$@"; do echo inactive > "$FAKE_SYSTEMCTL_STATE/$u"; done ;;
  is-active)
    rc=0
    for u in "$@"; do
      s=$(cat "$FAKE_SYSTEMCTL_STATE/$u" 2>/dev/null || echo inactive)
      echo "$s"
      [ "$s" = active ] || rc=3
    done
    exit $rc ;;
  show) echo 4242 ;;
  *) echo "fake systemctl: unknown command $cmd" >&2; exit 1 ;;
esac
`;

let t: TestDaemonContext | null = null;
let tmp: ReturnType<typeof makeTempDir> | null = null;
const sups: Supervisor[] = [];
afterEach(async () => {
  for (const s of sups.splice(0)) await s.stop();
  await t?.close();
  t = null;
  tmp?.remove();
  tmp = null;
});

describe('systemd backend', () => {
  it('drives systemctl --user with the unit of each agent', async () => {
    const clock = new FakeClock(Date.parse('2025-06-10T10:00:00Z'));
    tmp = makeTempDir('svcd-systemd-');
    const home = tmp.dir;
    const bin = join(home, 'bin');
    const stateDir = join(home, 'systemctl-state');
    const runtimeDir = join(home, 'run');
    for (const d of [bin, stateDir, runtimeDir]) mkdirSync(d, { recursive: true });
    writeFileSync(join(bin, 'systemctl'), FAKE_SYSTEMCTL);
    chmodSync(join(bin, 'systemctl'), 0o755);
    const callLog = join(home, 'systemctl.log');
    t = await makeTestDaemonContext({
      clock,
      home,
      env: {
        PATH: `${bin}:${process.env.PATH}`,
        HOME: home,
        XDG_RUNTIME_DIR: runtimeDir,
        FAKE_SYSTEMCTL_LOG: callLog,
        FAKE_SYSTEMCTL_STATE: stateDir,
      },
    });
    writeFileSync(
      t.ctx.paths.agentsToml,
      `[[agent]]
id = "web"
runtime = "alpha_code"
supervise = true
command = ["my-agent", "--serve", "{prompt}"]
prompt = 'say "hi" to $HOME at 100%'
env = { MODE = "prod" }
`,
    );
    const calls = () => readFileSync(callLog, 'utf8').trim().split('\n');
    const config = defaultSvcdConfig();
    config.supervisor.stopGraceMs = 5000;
    const start = async () => {
      const s = createSupervisor(t!.ctx, {
        config,
        userBus: true,
      });
      sups.push(s);
      await s.start();
      return s;
    };
    const sup = await start();

    expect(calls()).toEqual([
      // Nothing to re-adopt, so a fresh unit:
      '--user is-active svc-agent-web.service',
      '--user daemon-reload',
      '--user restart svc-agent-web.service',
      '--user show -p MainPID --value svc-agent-web.service',
    ]);
    expect(sup.listAgents()[0]).toMatchObject({
      id: 'web',
      backend: 'systemd',
      unit: 'svc-agent-web.service',
      state: 'running',
      pid: 4242,
      log_file: null,
    });
    const unitFile = join(runtimeDir, 'systemd', 'user', 'svc-agent-web.service');
    expect(statSync(unitFile).mode & 0o777).toBe(0o600);
    const text = readFileSync(unitFile, 'utf8');
    expect(text).toContain('ExecStart="my-agent" "--serve" "say \\"hi\\" to $$HOME at 100%%"\n');
    expect(text).toContain(`WorkingDirectory="${join(home, 'agents', 'web')}"\n`);
    expect(text).toContain('Environment="MODE=prod"\n');
    expect(text).toContain('Environment="SVC_AGENT_ID=web"\n');
    expect(text).toMatch(/\nEnvironment="SVC_SECRETS_SESSION=[A-Za-z0-9_-]{43}"\n/);
    expect(text).toContain(`Environment="SVC_SECRETS_SOCKET=${t.ctx.paths.secretsSock}"\n`);
    expect(text).toContain('\nRestart=no\nKillMode=control-group\nTimeoutStopSec=5\n');

    await sup.poll();
    expect(calls().slice(4)).toEqual(['--user is-active svc-agent-web.service']);
    expect(sup.listAgents()[0]?.restarts).toBe(0);

    writeFileSync(join(stateDir, 'svc-agent-web.service'), 'failed\n');
    await sup.poll();
    expect(calls().slice(5)).toEqual([
      '--user is-active svc-agent-web.service',
      '--user stop svc-agent-web.service',
      '--user daemon-reload',
      '--user restart svc-agent-web.service',
      '--user show -p MainPID --value svc-agent-web.service',
    ]);
    expect(sup.listAgents()[0]).toMatchObject({ state: 'running', restarts: 1, last_restart_reason: 'dead' });

    // svcd stopping leaves systemd units running; the next svcd re-adopts them.
    await sup.stop();
    sups.length = 0;
    expect(calls().length).toBe(10);
    const again = await start();
    expect(calls().slice(10)).toEqual([
      '--user is-active svc-agent-web.service',
      '--user show -p MainPID --value svc-agent-web.service',
    ]);
    expect(again.listAgents()[0]).toMatchObject({ state: 'running', pid: 4242 });

    await again.stopAgent('web');
    expect(calls().slice(12)).toEqual(['--user stop svc-agent-web.service']);
    expect(existsSync(unitFile)).toBe(false);
  });

  it('quotes words the way unit files need', () => {
    expect(systemdQuote('a b')).toBe('"a b"');
    expect(systemdQuote('say "x" \\ $HOME 5%')).toBe('"say \\"x\\" \\\\ $$HOME 5%%"');
    expect(systemdQuote('two\nlines')).toBe('"two\\nlines"');
  });
});

describe('backend choice', () => {
  const spec = (over: Partial<AgentSpec>): AgentSpec => ({
    id: 'a',
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
    ...over,
  });
  const c = defaultSvcdConfig();
  it('uses tmux for mux_hosted, process for ACP and PTY agents, and systemd only with a user bus', () => {
    expect(chooseBackend(spec({ runtime: 'mux_hosted' }), c, true)).toBe('tmux');
    expect(chooseBackend(spec({ runtime: 'alpha_agent_acp' }), c, true)).toBe('process');
    expect(chooseBackend(spec({ pty: true }), c, true)).toBe('process');
    expect(chooseBackend(spec({}), c, true)).toBe('systemd');
    expect(chooseBackend(spec({}), c, false)).toBe('process');
    expect(chooseBackend(spec({ backend: 'process' }), c, true)).toBe('process');
    expect(chooseBackend(spec({}), { ...c, supervisor: { ...c.supervisor, backend: 'process' } }, true)).toBe(
      'process',
    );
  });
});
