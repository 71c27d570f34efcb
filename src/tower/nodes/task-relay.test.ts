import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { waitFor } from '../../../test/support/poll.js';
import { makeTempDir } from '../../../test/support/tmp.js';
import { startTestTower, type TestTower } from '../../../test/support/tower.js';
import { silentLogger } from '../../lib/log.js';
import { createTower, type Tower } from '../tower.js';

const SECRET = 'b'.repeat(64);

describe('task_ready, task_cancelled and approval_decided across PostgreSQL replicas', () => {
  let a: TestTower;
  let b: Tower;
  let aWs: string;
  let bWs: string;
  const bDir = makeTempDir('svc-ready-');
  const sockets: WebSocket[] = [];

  beforeAll(async () => {
    a = await startTestTower('postgres');
    // Both on the wall clock: a replica's presence counts while its renewal is recent.
    b = await createTower({ database: a.databaseUrl, dataDir: bDir.dir, log: silentLogger() });
    aWs = (await a.tower.listen('127.0.0.1', 0)).replace('http', 'ws');
    bWs = (await b.listen('127.0.0.1', 0)).replace('http', 'ws');
  });
  afterAll(async () => {
    for (const s of sockets) s.close();
    await b?.stop();
    await a?.close();
    bDir.remove();
  });

  /** A node on a replica's control channel (b by default); returns the messages it receives. */
  async function connectNode(jwt: string, base = bWs) {
    const ws = new WebSocket(`${base}/nodes/connect`, { headers: { authorization: `Bearer ${jwt}` } });
    sockets.push(ws);
    const got: Record<string, unknown>[] = [];
    ws.on('message', (d) => got.push(JSON.parse(String(d)) as Record<string, unknown>));
    await new Promise((res, rej) => {
      ws.once('open', res);
      ws.once('error', rej);
    });
    ws.send(JSON.stringify({ type: 'hello', version: 'test', attach_secret: SECRET }));
    await waitFor('welcome', () => got.find((m) => m.type === 'welcome'));
    return Object.assign(got, { ws });
  }

  /** Until both replicas read the node online (its presence, written by the replica holding it). */
  const presentOnBoth = (nodeId: string) =>
    waitFor(`node ${nodeId} online on both replicas`, async () => {
      const onA = (await a.call('GET', `/nodes/${nodeId}`)).body.online;
      const onB = (
        await b.app.inject({ url: `/nodes/${nodeId}`, headers: { authorization: `Bearer ${a.adminToken}` } })
      ).json() as { online?: boolean };
      return onA === true && onB.online === true;
    });

  const readyFor = (msgs: Record<string, unknown>[], taskId: string) =>
    msgs.filter((x) => x.type === 'task_ready' && x.task_id === taskId).length;

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
    const got = await connectNode(node.jwt);
    const gotIdle = await connectNode(idle.jwt);
    await presentOnBoth(node.id);
    await presentOnBoth(idle.id);

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
    const got = await connectNode(node.jwt);
    const gotOther = await connectNode(other.jwt);
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

  it('wakes two idle nodes per first_claim task, chosen once for the fleet, in turn, and not a busy one', async () => {
    const d = ((await a.call('POST', '/domains', { name: 'rotate' })).body as { id: string }).id;
    const m = ((await a.call('POST', `/domains/${d}/m`, { name: 'r' })).body as { id: string }).id;
    const fleet: { id: string; jwt: string; agent: string; got: Awaited<ReturnType<typeof connectNode>> }[] =
      [];
    for (let i = 0; i < 4; i++) {
      const n = (await a.call('POST', '/nodes', { hostname: `rotate-${i}` })).body as {
        id: string;
        jwt: string;
      };
      const agent = (await a.call('POST', '/agents', { domain_id: d, runtime: 'beta_cli' }, n.jwt)).body as {
        id: string;
      };
      // Two nodes on each replica.
      const got = await connectNode(n.jwt, i < 2 ? aWs : bWs);
      fleet.push({ ...n, agent: agent.id, got });
    }
    for (const n of fleet) await presentOnBoth(n.id);
    const heard = (taskId: string) => fleet.reduce((sum, n) => sum + readyFor(n.got, taskId), 0);
    const submit = async (on: 'a' | 'b', title: string) => {
      const id =
        on === 'a'
          ? ((await a.call('POST', `/work/missions/${m}/tasks`, { title })).body as { id: string }).id
          : (
              (
                await b.app.inject({
                  method: 'POST',
                  url: `/work/missions/${m}/tasks`,
                  headers: { authorization: `Bearer ${a.adminToken}`, 'content-type': 'application/json' },
                  payload: JSON.stringify({ title }),
                })
              ).json() as { id: string }
            ).id;
      await waitFor(`task_ready of ${title} at two nodes`, () => heard(id) >= 2);
      return id;
    };

    // Four tasks made on each replica: each heard by two nodes, never more; each node woken
    // as often as the others (the rotation of each replica goes round all four).
    const ids: string[] = [];
    for (let k = 0; k < 4; k++) ids.push(await submit('a', `on a ${k}`));
    for (let k = 0; k < 4; k++) ids.push(await submit('b', `on b ${k}`));
    // A last task, then everything it could have caused has arrived (one socket, in order).
    const marker = await submit('a', 'marker');
    for (const id of ids) expect(heard(id)).toBe(2);
    expect(heard(marker)).toBe(2);
    expect(fleet.map((n) => ids.filter((id) => readyFor(n.got, id) > 0).length)).toEqual([4, 4, 4, 4]);

    // A busy agent is passed over while idle ones remain.
    const busy = fleet[0] as (typeof fleet)[number];
    busy.got.ws.send(JSON.stringify({ type: 'agent_status', agent_id: busy.agent, status: 'busy' }));
    await waitFor('the agent busy in the store', async () => {
      const r = await a.call('GET', `/agents/${busy.agent}`);
      return r.body.status === 'busy';
    });
    const later: string[] = [];
    for (let k = 0; k < 3; k++) later.push(await submit('a', `while busy ${k}`));
    for (const id of later) expect([readyFor(busy.got, id), heard(id)]).toEqual([0, 2]);
  });

  it('tells a node on another replica the decision on its approval', async () => {
    const node = (await a.call('POST', '/nodes', { hostname: 'decided-b' })).body as {
      id: string;
      jwt: string;
    };
    const d = ((await a.call('POST', '/domains', { name: 'decided' })).body as { id: string }).id;
    const got = await connectNode(node.jwt);
    await presentOnBoth(node.id);
    const asked = await a.call('POST', '/approvals', { domain_id: d, title: 'Run make' }, node.jwt);
    expect(asked.status).toBe(201);
    const id = asked.body.id as string;
    // Decided on replica a, which does not hold the node's channel.
    const reason = 'r'.repeat(2000);
    expect((await a.call('POST', `/approvals/${id}/reject`, { reason })).status).toBe(200);
    await waitFor('approval_decided on replica b', () => got.find((x) => x.type === 'approval_decided'));
    expect(got.filter((x) => x.type === 'approval_decided')).toEqual([
      { type: 'approval_decided', approval_id: id, status: 'rejected', reason },
    ]);
  });
});
