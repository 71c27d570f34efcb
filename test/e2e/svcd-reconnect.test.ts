// svcd keeps its control channel through a tower crash: kill -9 the tower, start it again on
// the same address and data, and svcd reconnects (hello again) and the node is online again.
import { afterAll, describe, expect, it } from 'vitest';
import { type NodeStack, startNodeStack } from '../support/node-stack.js';
import { waitFor } from '../support/poll.js';
import { type Proc, run, SVC_BIN, startTowerProc } from '../support/procs.js';

describe('svcd and a tower restart', () => {
  let stack: NodeStack;
  afterAll(async () => {
    await stack?.stop();
  });

  it('reconnects after kill -9 of the tower and is online again', async () => {
    stack = await startNodeStack({ name: 'reconnect', hostname: 'phoenix' });
    const { env, cli } = stack;
    let tower = stack.tower;
    const port = new URL(tower.url).port;
    const svcd = stack.svcd as Proc;
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
    const nodes = (await (
      await fetch(`${tower.url}/nodes`, { headers: { authorization: `Bearer ${stack.adminToken}` } })
    ).json()) as { items: { hostname: string; online: boolean }[] };
    expect(nodes.items.find((n) => n.hostname === 'phoenix')?.online).toBe(true);
    const status = JSON.parse((await run(SVC_BIN, ['--json', 'daemon', 'status'], cli)).stdout) as {
      components: { control: { connects: number } };
    };
    expect(status.components.control.connects).toBeGreaterThanOrEqual(2);
  });
});
