// svcd's life as an operator sees it, with real processes: no identity → exit 78; register
// (and --force rotation) → `svcd run` → `svc daemon status` over mgmt.sock; a second daemon is
// refused; a kill -9 leaves stale sockets that the next start replaces; SIGTERM removes the
// sockets; an invalid config.toml → exit 78 naming file, line and field. (A tower restart and the reconnect: svcd-reconnect.test.ts.)
import { existsSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { waitFor } from '../support/poll.js';
import {
  isolatedEnv,
  type Proc,
  run,
  SVC_BIN,
  SVCD_BIN,
  spawnProc,
  startTowerProc,
  stopAll,
  type TowerProc,
} from '../support/procs.js';
import { makeTempDir } from '../support/tmp.js';

interface Status {
  pid: number;
  version: string;
  uptime_seconds: number;
  tower: { connected: boolean };
  components: Record<string, unknown>;
}

describe('svcd run', () => {
  const tmp = makeTempDir('svc-e2e-svcd-');
  const env = isolatedEnv(tmp.dir);
  const home = env.SVC_HOME as string;
  const svcdDir = join(home, 'svcd');
  const socks = ['mgmt.sock', 'secrets.sock', 'svcd.sock'].map((s) => join(svcdDir, s));
  let tower: TowerProc;
  let cli: NodeJS.ProcessEnv;
  const svc = (...args: string[]) => run(SVC_BIN, args, cli);
  const status = async () => {
    const r = await svc('--json', 'daemon', 'status');
    if (r.code !== 0) throw new Error(r.stderr);
    return JSON.parse(r.stdout) as Status;
  };
  const startSvcd = async (): Promise<Proc> => {
    const p = spawnProc(SVCD_BIN, ['run', '--log-level', 'warn'], cli);
    await waitFor(
      'svcd to answer on mgmt.sock',
      async () => {
        const code = await Promise.race([p.exited, Promise.resolve(null)]);
        if (code !== null) throw new Error(`svcd exited (${code}): ${p.stderr()}`);
        return (await status()).pid === p.child.pid;
      },
      { timeoutMs: 90_000 },
    );
    return p;
  };

  afterAll(async () => {
    await stopAll();
    tmp.remove();
  });

  it('refuses to start without a node identity, with exit code 78 and what to run', async () => {
    const r = await run(SVCD_BIN, ['run'], env);
    expect(r.code).toBe(78);
    expect(r.stderr).toMatch(/svc agent node register/);
    expect(existsSync(join(svcdDir, 'mgmt.sock'))).toBe(false);
  });

  it('registers, runs, reports status, refuses a twin, survives kill -9, stops cleanly', async () => {
    tower = await startTowerProc(env);
    cli = { ...env, SVC_BASE_URL: tower.url };

    // Register; the same hostname again needs --force, which rotates the JWT.
    const reg = await svc('--json', 'agent', 'node', 'register', '--hostname', 'svcd-e2e');
    expect(reg.code).toBe(0);
    const nodeFile = env.SVC_NODE_FILE as string;
    expect(statSync(nodeFile).mode & 0o777).toBe(0o600);
    const first = JSON.parse(readFileSync(nodeFile, 'utf8')) as { node_id: string; jwt: string };
    const again = await svc('agent', 'node', 'register', '--hostname', 'svcd-e2e');
    expect(again.code).not.toBe(0);
    expect(again.stderr).toMatch(/already registered/);
    const forced = await svc('--json', 'agent', 'node', 'register', '--hostname', 'svcd-e2e', '--force');
    expect(forced.code).toBe(0);
    const rotated = JSON.parse(readFileSync(nodeFile, 'utf8')) as { node_id: string; jwt: string };
    expect(rotated.node_id).toBe(first.node_id);
    expect(rotated.jwt).not.toBe(first.jwt);
    const oldJwt = await fetch(`${tower.url}/nodes/${first.node_id}`, {
      headers: { authorization: `Bearer ${first.jwt}` },
    });
    expect(oldJwt.status).toBe(401);

    // Run; status over mgmt.sock; sockets 0600 in a 0700 directory.
    const svcd = await startSvcd();
    await waitFor('svcd to reach the tower', async () => (await status()).tower.connected);
    const s = await status();
    expect(s.version).toMatch(/^\d+\.\d+\.\d+/);
    expect(s.uptime_seconds).toBeGreaterThanOrEqual(0);
    expect(Object.keys(s.components)).toEqual(expect.arrayContaining(['control', 'secrets', 'attach']));
    expect(statSync(svcdDir).mode & 0o777).toBe(0o700);
    for (const p of socks) expect(statSync(p).mode & 0o777).toBe(0o600);

    // A second daemon on the same SVC_HOME is refused; the first keeps answering.
    const twin = await run(SVCD_BIN, ['run', '--log-level', 'warn'], cli);
    expect(twin.code).not.toBe(0);
    expect(twin.stderr).toMatch(/another svcd is already serving/);
    expect((await status()).pid).toBe(svcd.child.pid);

    // kill -9 leaves the socket files behind; the next start replaces them.
    svcd.kill('SIGKILL');
    await svcd.exited;
    for (const p of socks) expect(existsSync(p)).toBe(true);
    const second = await startSvcd();
    await waitFor('svcd to reach the tower again', async () => (await status()).tower.connected);

    // SIGTERM: a clean exit that removes every socket.
    second.kill('SIGTERM');
    expect(await second.exited).toBe(0);
    for (const p of socks) expect(existsSync(p)).toBe(false);
  });

  it('refuses to start with an invalid config.toml, naming file, line and field, with exit code 78', async () => {
    const file = join(svcdDir, 'config.toml');
    writeFileSync(file, '[worker]\nmax_concurrent = 3\n\n[watchdog]\ngrace = 90\n');
    try {
      const r = await run(SVCD_BIN, ['run', '--log-level', 'warn'], cli);
      expect(r.code).toBe(78);
      expect(r.stderr).toContain(
        `${file}:5: watchdog.grace: must be a string, got number 90 [config_invalid]`,
      );
      for (const p of socks) expect(existsSync(p)).toBe(false);
    } finally {
      rmSync(file);
    }
  });
});
