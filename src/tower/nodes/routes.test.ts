import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { waitFor } from '../../../test/support/poll.js';
import { STORES, startTestTower, type TestTower } from '../../../test/support/tower.js';
import { FakeClock } from '../../lib/clock.js';
import { NODE_REQUEST_TIMEOUT_MS, type NodeRequest } from '../../protocol/control.js';

const SECRET = 'b'.repeat(64);

describe.each(STORES)('node requests (status, agent actions) on %s', (store) => {
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

  /** A fake svcd: connects, says hello, answers node.request with `answer` (or not at all). */
  async function fakeNode(hostname: string, answer: (r: NodeRequest) => Record<string, unknown> | null) {
    const node = (await t.call('POST', '/nodes', { hostname: `${hostname}-${store}` })).body as {
      id: string;
      jwt: string;
    };
    const ws = new WebSocket(`${base}/nodes/connect`, { headers: { authorization: `Bearer ${node.jwt}` } });
    const asked: NodeRequest[] = [];
    ws.on('message', (d) => {
      const m = JSON.parse(String(d)) as { type: string };
      if (m.type !== 'node.request') return;
      const r = m as NodeRequest;
      asked.push(r);
      const a = answer(r);
      if (a) ws.send(JSON.stringify({ type: 'node.response', request_id: r.request_id, ...a }));
    });
    await new Promise((res, rej) => {
      ws.once('open', res);
      ws.once('error', rej);
    });
    ws.send(JSON.stringify({ type: 'hello', version: 'test', attach_secret: SECRET }));
    await waitFor('online', async () => (await t.call('GET', `/nodes/${node.id}`)).body.online === true);
    return { node, ws, asked };
  }

  it('returns the node status: supervision and cron as the node reports them', async () => {
    const status = { agents: [{ id: 'coder', state: 'running', paused: false }], cron: { jobs: [] } };
    const n = await fakeNode('st', () => ({ result: status }));
    const res = await t.call('GET', `/nodes/${n.node.id}/status`);
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ node_id: n.node.id, hostname: `st-${store}`, ...status });
    expect(n.asked.map((r) => [r.method, r.params])).toEqual([['node.status', {}]]);
    n.ws.close();
  });

  it('forwards restart, pause and resume of an agent and returns the node answer or its error', async () => {
    const n = await fakeNode('act', (r) =>
      r.params.id === 'ghost'
        ? { error: { code: 'agent_not_found', message: 'no agent ghost in agents.toml' } }
        : { result: { id: r.params.id, state: 'running', paused: r.method === 'agent.pause' } },
    );
    for (const action of ['restart', 'pause', 'resume']) {
      const res = await t.call('POST', `/nodes/${n.node.id}/agents/coder/actions`, { action });
      expect(res.status).toBe(200);
      expect(res.body).toEqual({ id: 'coder', state: 'running', paused: action === 'pause' });
    }
    expect(n.asked.map((r) => [r.method, r.params])).toEqual([
      ['agent.restart', { id: 'coder' }],
      ['agent.pause', { id: 'coder' }],
      ['agent.resume', { id: 'coder' }],
    ]);
    const missing = await t.call('POST', `/nodes/${n.node.id}/agents/ghost/actions`, { action: 'restart' });
    expect(missing.status).toBe(404);
    expect(missing.body).toMatchObject({ code: 'agent_not_found', detail: 'no agent ghost in agents.toml' });
    n.ws.close();
  });

  it('refuses bad input, a read-only token and a node that is offline or silent', async () => {
    const n = await fakeNode('quiet', () => null);
    const bad = await t.call('POST', `/nodes/${n.node.id}/agents/coder/actions`, { action: 'explode' });
    expect(bad.status).toBe(400);
    expect(String(bad.body.detail)).toContain('action');
    const reader = (await t.call('POST', '/tokens', { name: `reader-${store}`, scopes: ['feed:read'] }))
      .body as { token: string };
    const ro = await t.call(
      'POST',
      `/nodes/${n.node.id}/agents/coder/actions`,
      { action: 'restart' },
      reader.token,
    );
    expect(ro.status).toBe(403);
    expect(n.asked).toEqual([]);

    // The node never answers: after the timeout the caller gets `unavailable`.
    const pending = t.call('GET', `/nodes/${n.node.id}/status`);
    await waitFor('the request to reach the node', () => n.asked.length === 1);
    await clock.advance(NODE_REQUEST_TIMEOUT_MS);
    const silent = await pending;
    expect(silent.status).toBe(503);
    expect(silent.body.code).toBe('unavailable');

    // Disconnected while a request waits: node_offline at once.
    const waiting = t.call('POST', `/nodes/${n.node.id}/agents/coder/actions`, { action: 'pause' });
    await waitFor('the second request', () => n.asked.length === 2);
    n.ws.close();
    expect((await waiting).body.code).toBe('node_offline');
    await waitFor('offline', async () => (await t.call('GET', `/nodes/${n.node.id}`)).body.online === false);
    const off = await t.call('GET', `/nodes/${n.node.id}/status`);
    expect(off.status).toBe(503);
    expect(off.body.code).toBe('node_offline');
    expect((await t.call('GET', '/nodes/node_nope/status')).status).toBe(404);
  });
});
