// `svc daemon up|down|install-unit` with real processes. The test environment has no user bus
// (isolatedEnv strips it), so `up` starts a detached svcd with a pid file and a log file.
import { existsSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { isolatedEnv, run, SVC_BIN, startTowerProc, stopAll, type TowerProc } from '../support/procs.js';
import { makeTempDir } from '../support/tmp.js';

const alive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

describe('svc daemon up / down / install-unit', () => {
  const tmp = makeTempDir('svc-e2e-daemon-up-');
  const env = isolatedEnv(tmp.dir);
  const home = env.SVC_HOME as string;
  let tower: TowerProc;
  let cli: NodeJS.ProcessEnv;
  const svc = (...args: string[]) => run(SVC_BIN, args, cli);
  const pids: number[] = [];

  afterAll(async () => {
    for (const pid of pids) if (alive(pid)) process.kill(pid, 'SIGKILL');
    await stopAll();
    tmp.remove();
  });

  it('writes the user unit of the operator guide and says how to enable it', async () => {
    cli = { ...env, XDG_CONFIG_HOME: join(tmp.dir, 'config') };
    const r = await svc('--json', 'daemon', 'install-unit', '--backend-url', 'http://127.0.0.1:9999');
    expect(r.code).toBe(0);
    const out = JSON.parse(r.stdout) as { unit_file: string; next: string[] };
    expect(out.unit_file).toBe(join(tmp.dir, 'config', 'systemd', 'user', 'svcd.service'));
    expect(out.next).toContain('systemctl --user enable --now svcd.service');
    const unit = readFileSync(out.unit_file, 'utf8');
    expect(unit).toMatch(/^\[Unit\]$/m);
    expect(unit).toMatch(/^After=network-online\.target$/m);
    expect(unit).toMatch(/^Wants=network-online\.target$/m);
    expect(unit).toMatch(
      /^ExecStart=\S+ --max-semi-space-size=1 --single-threaded --optimize-for-size \S+svcd\.js run --backend-url http:\/\/127\.0\.0\.1:9999$/m,
    );
    expect(unit).toMatch(/^Restart=on-failure$/m);
    expect(unit).toMatch(/^RestartSec=5$/m);
    expect(unit).toMatch(/^EnvironmentFile=\S+svcd\.env$/m);
    expect(unit).toMatch(/^\[Install\]\nWantedBy=default\.target$/m);
    // SVC_HOME here is not ~/.svc, so the unit names it.
    expect(unit).toContain(`Environment=SVC_HOME=${home}`);
    expect(statSync(join(home, 'svcd.env')).mode & 0o777).toBe(0o600);
  });

  it('up without a node identity fails with exit 78 and svcd’s reason', async () => {
    const r = await run(SVC_BIN, ['daemon', 'up', '--backend-url', 'http://127.0.0.1:9'], env);
    expect(r.code).toBe(78);
    expect(r.stderr).toMatch(/svc agent node register/);
  });

  it('starts svcd in the background, is idempotent, and stops it', async () => {
    tower = await startTowerProc(env);
    cli = { ...env, SVC_BASE_URL: tower.url };
    expect((await svc('agent', 'node', 'register', '--hostname', 'up-node')).code).toBe(0);

    const booster = join(tmp.dir, 'x.wasm');
    writeFileSync(booster, '');
    const up = await svc('--json', 'daemon', 'up', '--booster-wasm', booster);
    expect(up.code, up.stderr).toBe(0);
    const started = JSON.parse(up.stdout) as { pid: number; mode: string; log: string };
    pids.push(started.pid);
    expect(started.mode).toBe('detached');
    expect(readFileSync(join(home, 'svcd', 'svcd.pid'), 'utf8').trim()).toBe(String(started.pid));
    // Where docs/operator-guide.md §5 says a detached svcd of `svc daemon up` logs.
    expect(started.log).toBe(join(home, 'svcd', 'logs', 'svcd.log'));
    expect(existsSync(started.log)).toBe(true);
    const rec = JSON.parse(readFileSync(join(home, 'svcd', 'daemon.json'), 'utf8')) as {
      booster_wasm: string;
    };
    expect(rec.booster_wasm).toMatch(/x\.wasm$/);

    const status = JSON.parse((await svc('--json', 'daemon', 'status')).stdout) as { pid: number };
    expect(status.pid).toBe(started.pid);

    const again = await svc('daemon', 'up');
    expect(again.code).toBe(0);
    expect(again.stdout).toMatch(/already running \(pid \d+\)/);

    const down = await svc('--json', 'daemon', 'down');
    expect(down.code).toBe(0);
    expect(JSON.parse(down.stdout)).toMatchObject({ stopped: true, pid: started.pid });
    expect(alive(started.pid)).toBe(false);
    expect(existsSync(join(home, 'svcd', 'svcd.pid'))).toBe(false);
    expect(existsSync(join(home, 'svcd', 'mgmt.sock'))).toBe(false);
    const idle = await svc('daemon', 'down');
    expect(idle.stdout).toMatch(/not running/);
  });

  it('starts with the short form "svc daemon --booster-wasm <path>", and a later plain up keeps the booster', async () => {
    const booster = join(tmp.dir, 'seed.wasm');
    writeFileSync(booster, '');
    const boosterOf = async () =>
      (
        JSON.parse((await svc('--json', 'daemon', 'status')).stdout) as {
          components: { mcp: { booster: { source: string } } };
        }
      ).components.mcp.booster.source;

    const seed = await svc('--json', 'daemon', '--booster-wasm', booster);
    expect(seed.code, seed.stderr).toBe(0);
    const first = JSON.parse(seed.stdout) as {
      pid: number;
      booster_wasm: string;
      booster_from_last_start: boolean;
    };
    pids.push(first.pid);
    expect(first).toMatchObject({ booster_wasm: booster, booster_from_last_start: false });
    expect(await boosterOf()).toBe(booster);
    expect((await svc('daemon', 'down')).code).toBe(0);

    // A plain `up` starts with the booster of the last start, and says so.
    const plain = await svc('daemon', 'up');
    expect(plain.code, plain.stderr).toBe(0);
    expect(plain.stdout).toContain(
      `booster ${booster}, as at the last start (--no-booster-wasm starts without it)`,
    );
    pids.push(Number(/pid (\d+)/.exec(plain.stdout)?.[1]));
    expect(await boosterOf()).toBe(booster);
    expect((await svc('daemon', 'down')).code).toBe(0);

    // --no-booster-wasm drops it, for this start and the next.
    const without = await svc('--json', 'daemon', 'up', '--no-booster-wasm');
    expect(without.code, without.stderr).toBe(0);
    pids.push((JSON.parse(without.stdout) as { pid: number }).pid);
    expect(JSON.parse(without.stdout)).not.toHaveProperty('booster_wasm');
    expect(await boosterOf()).toBe('embedded');
    expect((await svc('daemon', 'down')).code).toBe(0);

    // A remembered booster that is gone is refused, never silently dropped.
    expect((await svc('daemon', 'up', '--booster-wasm', booster)).code).toBe(0);
    expect((await svc('daemon', 'down')).code).toBe(0);
    rmSync(booster);
    const gone = await svc('daemon', 'up');
    expect(gone.code).toBe(78);
    expect(gone.stderr).toContain(`svcd last started with --booster-wasm ${booster}, which is gone`);
    const missing = await svc('daemon', '--booster-wasm', join(tmp.dir, 'nope.wasm'));
    expect(missing.code).toBe(78);
    expect(missing.stderr).toContain('no such file');
  });
});
