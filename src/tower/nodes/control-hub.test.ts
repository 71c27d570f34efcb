import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { waitFor } from '../../../test/support/poll.js';
import { STORES, startTestTower, type TestTower } from '../../../test/support/tower.js';
import { FakeClock } from '../../lib/clock.js';
import { DEAD_AFTER_MS, HEARTBEAT_MS } from '../../protocol/control.js';
import { RECHECK_MS } from '../auth/credential-watch.js';

const SECRET = 'a'.repeat(64);

describe.each(STORES)('node control channel on %s', (store) => {
  let t: TestTower;
  let base: string;
  const clock = new FakeClock(Date.parse('2026-11-23T10:00:00Z'));

  beforeAll(async () => {
    t = await startTestTower(store, { clock });
    base = (await t.tower.listen('127.0.0.1', 0)).replace('http', 'ws');
  });
  afterAll(async () => {
    await t?.close();
  });

  async function connect(jwt: string, opts: { autoPong?: boolean; hello?: unknown } = {}) {
    const ws = new WebSocket(`${base}/nodes/connect`, {
      headers: { authorization: `Bearer ${jwt}` },
      autoPong: opts.autoPong ?? true,
    });
    const got: Record<string, unknown>[] = [];
    let closed: number | null = null;
    ws.on('message', (d) => got.push(JSON.parse(String(d)) as Record<string, unknown>));
    ws.on('close', (code) => {
      closed = code;
    });
    await new Promise((res, rej) => {
      ws.once('open', res);
      ws.once('error', rej);
    });
    ws.send(
      JSON.stringify(
        'hello' in opts ? opts.hello : { type: 'hello', version: 'test', attach_secret: SECRET },
      ),
    );
    return { ws, got, closed: () => closed };
  }

  async function setup(name: string) {
    const node = (await t.call('POST', '/nodes', { hostname: `${name}-${store}` })).body as {
      id: string;
      jwt: string;
    };
    const d = (await t.call('POST', '/domains', { name })).body as { id: string };
    const m = (await t.call('POST', `/domains/${d.id}/m`, { name })).body as { id: string };
    const agent = (await t.call('POST', '/agents', { domain_id: d.id, runtime: 'beta_cli' }, node.jwt))
      .body as {
      id: string;
    };
    return { node, domainId: d.id, missionId: m.id, agentId: agent.id };
  }

  it('welcomes a node, shows it online, sends task_ready and task_cancelled', async () => {
    const s = await setup('ctl');
    const c = await connect(s.node.jwt);
    await waitFor('welcome', () => c.got.find((m) => m.type === 'welcome'));
    expect(c.got[0]).toEqual({ type: 'welcome', node_id: s.node.id, heartbeat_ms: HEARTBEAT_MS });
    expect((await t.call('GET', `/nodes/${s.node.id}`)).body.online).toBe(true);
    expect(t.tower.nodes.attachSecret(s.node.id)).toBe(SECRET);

    const task = (await t.call('POST', `/work/missions/${s.missionId}/tasks`, { title: 'x' })).body as {
      id: string;
    };
    await waitFor('task_ready', () => c.got.find((m) => m.type === 'task_ready'));
    expect(c.got.find((m) => m.type === 'task_ready')).toEqual({
      type: 'task_ready',
      task_id: task.id,
      mission_id: s.missionId,
      domain_id: s.domainId,
    });
    const claim = await t.call(
      'POST',
      '/mcp/call',
      { tool: 'claim_mesh_task', args: { agent_id: s.agentId } },
      s.node.jwt,
    );
    expect(claim.status).toBe(200);
    await t.call('POST', `/work/tasks/${task.id}/cancel`);
    await waitFor('task_cancelled', () => c.got.find((m) => m.type === 'task_cancelled'));

    c.ws.close();
    await waitFor('offline', async () => (await t.call('GET', `/nodes/${s.node.id}`)).body.online === false);
    await waitFor(
      'agents offline',
      async () => (await t.call('GET', `/agents/${s.agentId}`)).body.status === 'offline',
    );
  });

  it('sends task_ready again when a task is retried and when its lease expires', async () => {
    const s = await setup('ctl-again');
    const c = await connect(s.node.jwt);
    await waitFor('welcome', () => c.got.find((m) => m.type === 'welcome'));
    const task = (
      await t.call('POST', `/work/missions/${s.missionId}/tasks`, { title: 'again', lease_seconds: 10 })
    ).body as { id: string };
    const readies = () => c.got.filter((m) => m.type === 'task_ready' && m.task_id === task.id);
    const claim = async () => {
      const r = await t.call(
        'POST',
        '/mcp/call',
        { tool: 'claim_mesh_task', args: { agent_id: s.agentId, mission_id: s.missionId } },
        s.node.jwt,
      );
      return r.body.result as { task: { id: string }; lease_id: string };
    };
    await waitFor('task_ready when created', () => readies().length === 1);

    const first = await claim();
    expect(first.task.id).toBe(task.id);
    await t.call(
      'POST',
      '/mcp/call',
      { tool: 'fail_mesh_task', args: { task_id: task.id, lease_id: first.lease_id, reason: 'flaky' } },
      s.node.jwt,
    );
    expect((await t.call('POST', `/work/tasks/${task.id}/retry`)).status).toBe(200);
    await waitFor('task_ready when retried', () => readies().length === 2);

    expect((await claim()).task.id).toBe(task.id);
    await clock.advance(10_000);
    await waitFor('task_ready when the lease expired', async () => {
      await clock.advance(1000);
      return readies().length === 3;
    });
    expect(readies()).toEqual(
      Array.from({ length: 3 }, () => ({
        type: 'task_ready',
        task_id: task.id,
        mission_id: s.missionId,
        domain_id: s.domainId,
      })),
    );
    c.ws.close();
  });

  it('refuses a channel without a node credential or without a valid hello', async () => {
    const s = await setup('ctl-bad');
    const bad = await connect(s.node.jwt, { hello: { type: 'hello', version: 'x', attach_secret: 'short' } });
    await waitFor('close', () => bad.closed() !== null);
    expect(bad.closed()).toBe(1008);
    const admin = await connect(t.adminToken);
    await waitFor('close', () => admin.closed() !== null);
    expect(admin.closed()).toBe(1008);
  });

  it('closes a silent channel after DEAD_AFTER_MS and marks the node offline', async () => {
    const s = await setup('ctl-dead');
    const c = await connect(s.node.jwt, { autoPong: false });
    await waitFor('welcome', () => c.got.find((m) => m.type === 'welcome'));
    await waitFor('the channel to be closed', async () => {
      await clock.advance(HEARTBEAT_MS);
      return c.closed() !== null;
    });
    expect(clock.now()).toBeGreaterThanOrEqual(Date.parse('2026-11-23T10:00:00Z') + DEAD_AFTER_MS);
    await waitFor('offline', async () => (await t.call('GET', `/nodes/${s.node.id}`)).body.online === false);
  });

  it('closes a channel whose first frame is null, [] or not JSON with 1008, and serves on', async () => {
    const s = await setup('nullframe');
    for (const hello of [null, [], 1, 's', {}, { type: 'agent_status', agent_id: 'a', status: 'idle' }]) {
      const c = await connect(s.node.jwt, { hello });
      await waitFor('the close', () => c.closed());
      expect(c.closed()).toBe(1008);
    }
    const ok = await connect(s.node.jwt);
    await waitFor('welcome', () => ok.got.find((m) => m.type === 'welcome'));
    // Once welcomed, an invalid message of a known type closes it too; an unknown type does not.
    ok.ws.send(JSON.stringify({ type: 'future_message', x: 1 }));
    ok.ws.send(JSON.stringify({ type: 'agent_status', agent_id: 5 }));
    await waitFor('the close', () => ok.closed());
    expect(ok.closed()).toBe(1008);
    expect((await t.call('GET', '/healthz', undefined, null)).status).toBe(200);
  });

  it('closes the channel of a node re-registered with force within one re-check period', async () => {
    const s = await setup('rotated');
    const c = await connect(s.node.jwt);
    await waitFor('welcome', () => c.got.find((m) => m.type === 'welcome'));
    const again = await t.call('POST', '/nodes', { hostname: `rotated-${store}`, force: true });
    expect(again.status).toBe(200);
    await clock.advance(RECHECK_MS);
    await waitFor('the close', () => c.closed());
    expect(c.closed()).toBe(1008);
    await waitFor('offline', async () => (await t.call('GET', `/nodes/${s.node.id}`)).body.online === false);
  });

  it('closes the channel of a node whose signing key is retired within one re-check period', async () => {
    const s = await setup('retired');
    const c = await connect(s.node.jwt);
    await waitFor('welcome', () => c.got.find((m) => m.type === 'welcome'));
    const keys = (await t.call('GET', '/admin/signing-keys')).body.items as {
      kid: string;
      active: boolean;
    }[];
    const current = keys.find((k) => k.active)?.kid as string;
    expect((await t.call('POST', '/admin/signing-keys/rotate')).status).toBe(201);
    expect((await t.call('POST', `/admin/signing-keys/${current}/retire`)).status).toBe(200);
    await clock.advance(RECHECK_MS);
    await waitFor('the close', () => c.closed());
    expect(c.closed()).toBe(1008);
  });
});
