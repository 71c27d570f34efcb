// `svc daemon up|down` on the systemd path, with a test double for the user bus: a fake
// `systemctl` on PATH that records its calls and runs the unit from its file alone (ExecStart,
// Environment=, EnvironmentFile=, a minimal environment), as the user manager would. So the
// unit `up` writes must be enough to start a working svcd.
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { type FakeSystemctl, installFakeSystemctl } from '../support/fake-systemctl.js';
import { isolatedEnv, run, SVC_BIN, startTowerProc, stopAll } from '../support/procs.js';
import { makeTempDir } from '../support/tmp.js';

const alive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

describe('svc daemon up / down through systemctl --user', () => {
  const tmp = makeTempDir('svc-e2e-daemon-systemd-');
  const base = isolatedEnv(tmp.dir);
  const home = base.SVC_HOME as string;
  const unit = 'svcd.service';
  let fake: FakeSystemctl;
  let env: NodeJS.ProcessEnv;
  const svc = async (...args: string[]) => run(SVC_BIN, args, env);

  afterAll(async () => {
    const pid = fake?.mainPid(unit);
    if (pid && alive(pid)) process.kill(pid, 'SIGKILL');
    await stopAll();
    tmp.remove();
  });

  it('installs the unit, starts it with systemctl --user, answers status, and stops it', async () => {
    fake = installFakeSystemctl(tmp.dir, base.PATH);
    const tower = await startTowerProc(base);
    env = { ...base, ...fake.env, SVC_BASE_URL: tower.url };
    expect((await svc('agent', 'node', 'register', '--hostname', 'systemd-node')).code).toBe(0);
    // The unit's EnvironmentFile: svcd under systemd sees only what the unit gives it.
    mkdirSync(home, { recursive: true });
    writeFileSync(join(home, 'svcd.env'), `SVC_NODE_FILE=${base.SVC_NODE_FILE}\n`, { mode: 0o600 });

    const up = await svc('--json', 'daemon', 'up');
    expect(up.code, up.stderr).toBe(0);
    const started = JSON.parse(up.stdout) as { pid: number; mode: string; backend_url: string };
    expect(started.mode).toBe('systemd');
    expect(started.backend_url).toBe(tower.url);
    expect(fake.calls()).toEqual(['--user daemon-reload', `--user restart ${unit}`]);
    // The process answering on mgmt.sock is the one the user manager started from the unit.
    expect(started.pid).toBe(fake.mainPid(unit));
    const unitText = readFileSync(join(env.XDG_CONFIG_HOME as string, 'systemd', 'user', unit), 'utf8');
    expect(unitText).toContain(`Environment=SVC_HOME=${home}`);
    expect(unitText).toContain(`--backend-url ${tower.url}`);
    const record = JSON.parse(readFileSync(join(home, 'svcd', 'daemon.json'), 'utf8')) as { mode: string };
    expect(record.mode).toBe('systemd');

    const status = await svc('--json', 'daemon', 'status');
    expect(JSON.parse(status.stdout)).toMatchObject({ pid: started.pid, backend_url: tower.url });
    const again = await svc('daemon', 'up');
    expect(again.stdout).toMatch(/already running/);
    expect(fake.calls()).toHaveLength(2);

    // With a user bus the doctor asks the user manager too.
    const doctor = await svc('--json', 'system', 'doctor');
    const checks = (JSON.parse(doctor.stdout) as { checks: { name: string; status: string }[] }).checks;
    expect(checks.find((c) => c.name === 'systemctl_user')?.status).toBe('ok');
    expect(fake.calls()).toContain('--user is-system-running');

    const down = await svc('--json', 'daemon', 'down');
    expect(down.code).toBe(0);
    expect(JSON.parse(down.stdout)).toMatchObject({ stopped: true, pid: started.pid, how: 'systemd' });
    expect(fake.calls().at(-1)).toBe(`--user stop ${unit}`);
    expect(alive(started.pid)).toBe(false);
    // svcd removed its sockets on the SIGTERM systemd sent.
    expect((await svc('daemon', 'status')).code).toBe(69);
  });

  it('reports a unit systemd could not start, with the way out', async () => {
    const failing = { ...env, FAKE_SYSTEMCTL_FAIL: 'restart' };
    const r = await run(SVC_BIN, ['daemon', 'up'], failing);
    expect(r.code).toBe(69);
    expect(r.stderr).toMatch(/systemctl --user could not start .*svcd\.service: Failed to restart/);
    expect(r.stderr).toMatch(/retry with --no-systemd/);
  });

  it('starts a detached svcd with --no-systemd even when a user bus exists', async () => {
    const before = fake.calls().length;
    const up = await svc('--json', 'daemon', 'up', '--no-systemd');
    expect(up.code, up.stderr).toBe(0);
    const started = JSON.parse(up.stdout) as { pid: number; mode: string };
    expect(started.mode).toBe('detached');
    expect(fake.calls()).toHaveLength(before);
    const down = await svc('--json', 'daemon', 'down');
    expect(JSON.parse(down.stdout)).toMatchObject({ stopped: true, pid: started.pid, how: 'signal' });
    expect(alive(started.pid)).toBe(false);
  });
});
