// svcd keeps its control channel through a tower crash: kill -9 the tower, start it again on
// the same address and data, and svcd reconnects (hello again) and the node is online again.
import { mkdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { waitFor } from '../support/poll.js';
import { isolatedEnv, run, SVC_BIN, SVCD_BIN, spawnProc, startTowerProc, stopAll } from '../support/procs.js';
import { makeTempDir } from '../support/tmp.js';

describe('svcd and a tower restart', () => {
  const tmp = makeTempDir('svc-e2e-reconnect-');
  const env = isolatedEnv(tmp.dir);
  afterAll(async () => {
    await stopAll();
    tmp.remove();
  });

  it('reconnects after kill -9 of the tower and is online again', async () => {
    mkdirSync(env.SVC_HOME as string, { recursive: true, mode: 0o700 });
    let tower = await startTowerProc(env);
    const port = new URL(tower.url).port;
    const cli = { ...env, SVC_BASE_URL: tower.url };
    expect((await run(SVC_BIN, ['agent', 'node', 'register', '--hostname', 'phoenix'], cli)).code).toBe(0);
    const svcd = spawnProc(SVCD_BIN, ['run', '--backend-url', tower.url], env);
    const connected = async () => {
      if (svcd.child.exitCode !== null) throw new Error(`svcd exited: ${svcd.stderr()}`);
      const r = await run(SVC_BIN, ['--json', 'daemon', 'status'], cli);
      return r.code === 0
        ? (JSON.parse(r.stdout) as { tower: { connected: boolean } }).tower.connected
        : false;
    };
    await waitFor('svcd to connect', connected, { timeoutMs: 90_000 });

    tower.kill('SIGKILL');
    await tower.exited;
    await waitFor('svcd to notice', async () => !(await connected()), { timeoutMs: 90_000 });
    tower = await startTowerProc(env, ['--listen', `127.0.0.1:${port}`]);
    await waitFor('svcd to reconnect', connected, { timeoutMs: 90_000 });
    const admin = readFileSync(join(env.SVC_HOME as string, 'tower', 'admin.token'), 'utf8').trim();
    const nodes = (await (
      await fetch(`${tower.url}/nodes`, { headers: { authorization: `Bearer ${admin}` } })
    ).json()) as { items: { hostname: string; online: boolean }[] };
    expect(nodes.items.find((n) => n.hostname === 'phoenix')?.online).toBe(true);
    const status = JSON.parse((await run(SVC_BIN, ['--json', 'daemon', 'status'], cli)).stdout) as {
      components: { control: { connects: number } };
    };
    expect(status.components.control.connects).toBeGreaterThanOrEqual(2);
  });
});
