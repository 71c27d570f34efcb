import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { waitFor } from '../../../test/support/poll.js';
import { makeTempDir } from '../../../test/support/tmp.js';
import { startTestTower, type TestTower } from '../../../test/support/tower.js';
import { FakeClock } from '../../lib/clock.js';
import { silentLogger } from '../../lib/log.js';
import { createTower, type Tower } from '../tower.js';

const SECRET = 'b'.repeat(64);

describe('task_ready and task_cancelled across PostgreSQL replicas', () => {
  let a: TestTower;
  let b: Tower;
  let bWs: string;
  const bDir = makeTempDir('svc-ready-');
  const sockets: WebSocket[] = [];

  beforeAll(async () => {
    a = await startTestTower('postgres');
    b = await createTower({
      database: a.databaseUrl,
      dataDir: bDir.dir,
      log: silentLogger(),
      clock: new FakeClock(Date.parse('2026-11-23T10:00:00Z')),
    });
    bWs = (await b.listen('127.0.0.1', 0)).replace('http', 'ws');
  });
  afterAll(async () => {
    for (const s of sockets) s.close();
    await b?.stop();
    await a?.close();
    bDir.remove();
  });

  /** A node on replica b's control channel; returns the messages it receives. */
  async function connectToB(jwt: string) {
    const ws = new WebSocket(`${bWs}/nodes/connect`, { headers: { authorization: `Bearer ${jwt}` } });
    sockets.push(ws);
    const got: Record<string, unknown>[] = [];
    ws.on('message', (d) => got.push(JSON.parse(String(d)) as Record<string, unknown>));
    await new Promise((res, rej) => {
      ws.once('open', res);
      ws.once('error', rej);
    });
    ws.send(JSON.stringify({ type: 'hello', version: 'test', attach_secret: SECRET }));
    await waitFor('welcome', () => got.find((m) => m.type === 'welcome'));
    return got;
  }

  it('wakes a node connected to another replica, only for tasks its agents could claim', async () => {
    const node = (await a.call('POST', '/nodes', { hostname: 'ready-b' })).body as {
      id: string;
      jwt: string;
    };
    const idle = (await a.call('POST', '/nodes', { hostname: 'ready-other' })).body as {
      id: string;
      jwt: string;
    };
    const d = ((await a.call('POST', '/domains', { name: 'ready' })).body as { id: string }).id;
    const m = ((await a.call('POST', `/domains/${d}/m`, { name: 'r' })).body as { id: string }).id;
    await a.call('POST', '/agents', { domain_id: d, runtime: 'beta_cli', capabilities: ['gpu'] }, node.jwt);
    await a.call('POST', '/agents', { domain_id: d, runtime: 'beta_cli' }, idle.jwt);
    const got = await connectToB(node.jwt);
    const gotIdle = await connectToB(idle.jwt);

    // Made on replica a, which holds no channel: the nodes on replica b hear of it.
    const gpu = (
      await a.call('POST', `/work/missions/${m}/tasks`, { title: 'g', required_capabilities: ['gpu'] })
    ).body as { id: string };
    await waitFor('task_ready on replica b', () => got.find((x) => x.task_id === gpu.id));
    expect(got.find((x) => x.task_id === gpu.id)).toEqual({
      type: 'task_ready',
      task_id: gpu.id,
      mission_id: m,
      domain_id: d,
    });
    // The node without the capability is not told; a task it can take reaches it.
    const any = (await a.call('POST', `/work/missions/${m}/tasks`, { title: 'a' })).body as { id: string };
    await waitFor('task_ready for the plain node', () => gotIdle.find((x) => x.task_id === any.id));
    expect(gotIdle.some((x) => x.task_id === gpu.id)).toBe(false);
    // Each node heard of each task once (replica b does not echo its own notifications).
    await waitFor('task_ready for the gpu node', () => got.find((x) => x.task_id === any.id));
    const made = (
      await b.app.inject({
        method: 'POST',
        url: `/work/missions/${m}/tasks`,
        headers: { authorization: `Bearer ${a.adminToken}`, 'content-type': 'application/json' },
        payload: JSON.stringify({ title: 'on b' }),
      })
    ).json() as { id: string };
    await waitFor('task_ready for a task made on b', () => got.find((x) => x.task_id === made.id));
    const ready = got.filter((x) => x.type === 'task_ready').map((x) => x.task_id);
    expect(ready.sort()).toEqual([gpu.id, any.id, made.id].sort());
  });

  it('tells the node on another replica that its claimed or running task was cancelled, and no other node', async () => {
    const node = (await a.call('POST', '/nodes', { hostname: 'cancel-b' })).body as {
      id: string;
      jwt: string;
    };
    const other = (await a.call('POST', '/nodes', { hostname: 'cancel-other' })).body as {
      id: string;
      jwt: string;
    };
    const d = ((await a.call('POST', '/domains', { name: 'cancel' })).body as { id: string }).id;
    const m = ((await a.call('POST', `/domains/${d}/m`, { name: 'c' })).body as { id: string }).id;
    const agent = (await a.call('POST', '/agents', { domain_id: d, runtime: 'beta_cli' }, node.jwt)).body as {
      id: string;
    };
    const otherAgent = (await a.call('POST', '/agents', { domain_id: d, runtime: 'beta_cli' }, other.jwt))
      .body as { id: string };
    const got = await connectToB(node.jwt);
    const gotOther = await connectToB(other.jwt);
    const claim = async (agentId: string, jwt: string) => {
      const r = await a.call(
        'POST',
        '/mcp/call',
        { tool: 'claim_mesh_task', args: { agent_id: agentId, mission_id: m } },
        jwt,
      );
      return r.body.result as { task: { id: string }; lease_id: string };
    };
    const submit = async (title: string, extra: Record<string, unknown> = {}) =>
      ((await a.call('POST', `/work/missions/${m}/tasks`, { title, ...extra })).body as { id: string }).id;

    const claimedId = await submit('claimed');
    const claimed = await claim(agent.id, node.jwt);
    expect(claimed.task.id).toBe(claimedId);
    const runningId = await submit('running');
    const running = await claim(agent.id, node.jwt);
    expect(running.task.id).toBe(runningId);
    const started = await a.call(
      'POST',
      '/mcp/call',
      { tool: 'start_mesh_task', args: { task_id: runningId, lease_id: running.lease_id } },
      node.jwt,
    );
    expect(started.status).toBe(200);
    const pendingId = await submit('pending');

    // All three cancelled on replica a, which holds no channel.
    for (const id of [claimedId, runningId, pendingId]) {
      expect((await a.call('POST', `/work/tasks/${id}/cancel`)).body.state).toBe('cancelled');
    }
    await waitFor('task_cancelled of the running task on replica b', () =>
      got.find((x) => x.type === 'task_cancelled' && x.task_id === runningId),
    );
    await waitFor('task_cancelled of the claimed task on replica b', () =>
      got.find((x) => x.type === 'task_cancelled' && x.task_id === claimedId),
    );
    // A broadcast run the other node's agent holds: cancelling the parent tells that node.
    const parent = await submit('everyone', { claim_policy: 'broadcast' });
    const run = await claim(otherAgent.id, other.jwt);
    expect(run.task.id).not.toBe(parent);
    expect((await a.call('POST', `/work/tasks/${parent}/cancel`)).body.state).toBe('cancelled');
    await waitFor('task_cancelled of the broadcast run', () =>
      gotOther.find((x) => x.type === 'task_cancelled' && x.task_id === run.task.id),
    );
    // Only the holder's node, only held tasks, each once (replica b does not echo).
    const cancelled = (msgs: Record<string, unknown>[]) =>
      msgs.filter((x) => x.type === 'task_cancelled').map((x) => x.task_id);
    expect(cancelled(got).sort()).toEqual([claimedId, runningId].sort());
    expect(cancelled(gotOther)).toEqual([run.task.id]);
  });
});
