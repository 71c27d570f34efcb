// The tower as a service: options from SVC_TOWER_* variables (a flag wins), a one-line reason
// when it cannot start, and `svc tower install-unit`, whose unit is run by a fake systemctl
// from the unit file alone, as the user manager would.
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import { join } from 'node:path';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { installFakeSystemctl } from '../support/fake-systemctl.js';
import { waitFor } from '../support/poll.js';
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

describe('svc tower serve from the environment, and its start errors', () => {
  const tmp = makeTempDir('svc-e2e-tower-env-');
  afterEach(async () => stopAll());
  afterAll(() => tmp.remove());

  it('takes its options from SVC_TOWER_* variables, a flag winning over its variable', async () => {
    const env = {
      ...isolatedEnv(tmp.dir, 'env'),
      SVC_TOWER_DATA_DIR: join(tmp.dir, 'data'),
      SVC_TOWER_LISTEN: '127.0.0.1:1', // the flag of startTowerProc wins
      SVC_TOWER_RATE_LIMIT: '7/1m',
    };
    const tower = await startTowerProc(env);
    const res = await fetch(`${tower.url}/healthz`);
    expect(res.status).toBe(200);
    expect(existsSync(join(tmp.dir, 'data', 'admin.token'))).toBe(true);
    const admin = readFileSync(join(tmp.dir, 'data', 'admin.token'), 'utf8').trim();
    const limited = await fetch(`${tower.url}/domains`, { headers: { authorization: `Bearer ${admin}` } });
    expect(limited.headers.get('ratelimit-limit')).toBe('7');
  });

  it('refuses a bad variable as a usage error naming it', async () => {
    const env = { ...isolatedEnv(tmp.dir, 'bad'), SVC_TOWER_LISTEN: 'nowhere' };
    const r = await run(SVC_BIN, ['tower', 'serve'], env);
    expect(r.code).toBe(2);
    expect(r.stderr.trim()).toBe(
      'svc: error: invalid SVC_TOWER_LISTEN "nowhere": expected HOST:PORT, e.g. 127.0.0.1:8008 (port 0 picks a free one)',
    );
  });

  it('says in one line why the database cannot be used, without its password, and exits 69 or 78', async () => {
    const env = isolatedEnv(tmp.dir, 'db');
    const serve = (database: string) =>
      run(SVC_BIN, ['tower', 'serve', '--listen', '127.0.0.1:0', '--database', database], env);
    const down = await serve('postgres://root:hunter2@127.0.0.1:1/test');
    expect(down.code).toBe(69);
    expect(down.stderr.trim().split('\n')).toEqual([
      'svc: error: cannot reach the database postgres://root@127.0.0.1:1/test: connect ECONNREFUSED 127.0.0.1:1 (is PostgreSQL running and listening there?) [unavailable]',
    ]);
    const missing = await serve('postgres://root@127.0.0.1:5432/svc_no_such_database');
    expect(missing.code).toBe(78);
    expect(missing.stderr.trim().split('\n')).toEqual([
      'svc: error: database postgres://root@127.0.0.1:5432/svc_no_such_database: database "svc_no_such_database" does not exist (create it with createdb, or fix --database) [config_invalid]',
    ]);
    const scheme = await serve('mysql://x');
    expect(scheme.code).toBe(78);
    expect(scheme.stderr.trim().split('\n')).toHaveLength(1);
  });

  it('says in one line that its address is in use', async () => {
    const holder: Server = createServer();
    const port = await new Promise<number>((r) =>
      holder.listen(0, '127.0.0.1', () => r((holder.address() as { port: number }).port)),
    );
    try {
      const r = await run(
        SVC_BIN,
        ['tower', 'serve', '--listen', `127.0.0.1:${port}`, '--log-level', 'warn'],
        isolatedEnv(tmp.dir, 'busy'),
      );
      expect(r.code).toBe(69);
      expect(r.stderr.trim()).toBe(
        `svc: error: cannot listen on 127.0.0.1:${port}: the address is in use (EADDRINUSE): another tower or program holds it; stop it or choose another --listen address [unavailable]`,
      );
    } finally {
      await new Promise((r) => holder.close(r));
    }
  });
});

describe('svc tower install-unit', () => {
  const tmp = makeTempDir('svc-e2e-tower-unit-');
  const base = isolatedEnv(tmp.dir);
  const home = base.SVC_HOME as string;
  const unit = 'svc-tower.service';
  const fake = installFakeSystemctl(tmp.dir, base.PATH);
  const env = { ...base, ...fake.env };

  afterAll(async () => {
    const pid = fake.mainPid(unit);
    if (pid && alive(pid)) process.kill(pid, 'SIGKILL');
    await stopAll();
    tmp.remove();
  });

  it('writes a unit that runs svc tower serve with the given options and the environment file', async () => {
    const r = await run(
      SVC_BIN,
      ['--json', 'tower', 'install-unit', '--listen', '127.0.0.1:0', '--event-retention', '2d'],
      env,
    );
    expect(r.code, r.stderr).toBe(0);
    const out = JSON.parse(r.stdout) as {
      unit_file: string;
      env_file: string;
      args: string[];
      next: string[];
    };
    expect(out.unit_file).toBe(join(tmp.dir, 'config', 'systemd', 'user', unit));
    expect(out.env_file).toBe(join(home, 'tower.env'));
    expect(out.args).toEqual(['--listen', '127.0.0.1:0', '--event-retention', '2d']);
    expect(out.next).toContain(`systemctl --user enable --now ${unit}`);
    const text = readFileSync(out.unit_file, 'utf8');
    expect(text).toMatch(
      /^ExecStart=\S+node \S+svc\.js tower serve --listen 127\.0\.0\.1:0 --event-retention 2d$/m,
    );
    expect(text).toMatch(/^Restart=on-failure$/m);
    expect(text).toMatch(/^RestartSec=5$/m);
    expect(text).toMatch(/^After=network-online\.target$/m);
    expect(text).toMatch(/^\[Install\]\nWantedBy=default\.target$/m);
    expect(text).toContain(`Environment=SVC_HOME=${home}`);
    expect(text).toContain(`EnvironmentFile=${join(home, 'tower.env')}`);
    expect(readFileSync(out.env_file, 'utf8')).toMatch(/^# /);

    // The user manager runs it from the unit alone; tower.env reaches it.
    const data = join(tmp.dir, 'tower-data');
    mkdirSync(data);
    writeFileSync(out.env_file, `SVC_TOWER_DATA_DIR=${data}\nSVC_TOWER_LOG_LEVEL=warn\n`, { mode: 0o600 });
    const start = spawnSync('systemctl', ['--user', 'start', unit], { env, encoding: 'utf8' });
    expect(start.status, start.stderr).toBe(0);
    const url = await waitFor(
      "the unit's tower to listen",
      () => /listening on (\S+)/.exec(fake.journal(unit))?.[1],
      {
        timeoutMs: 90_000,
      },
    );
    expect((await fetch(`${url}/healthz`)).status).toBe(200);
    expect(existsSync(join(data, 'admin.token'))).toBe(true);
    const pid = fake.mainPid(unit) as number;
    expect(spawnSync('systemctl', ['--user', 'stop', unit], { env }).status).toBe(0);
    expect(alive(pid)).toBe(false);
  });
});
