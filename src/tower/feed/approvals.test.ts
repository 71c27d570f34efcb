import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { waitFor } from '../../../test/support/poll.js';
import { meshFixture, STORES, startTestTower, type TestTower } from '../../../test/support/tower.js';

describe.each(STORES)('approvals and inbox on %s', (store) => {
  let t: TestTower;
  beforeAll(async () => {
    t = await startTestTower(store);
  });
  afterAll(async () => {
    await t?.close();
  });

  const domain = async (name: string) => (await t.call('POST', '/domains', { name })).body as { id: string };
  const eventsOf = async (type: string) =>
    (
      await t.tower.store.db
        .selectFrom('events')
        .select(['type', 'status', 'payload'])
        .where('type', '=', type)
        .orderBy('id')
        .execute()
    ).map((e) => ({ status: e.status, payload: JSON.parse(e.payload) as Record<string, unknown> }));

  it('decides an approval once; a second decision is 409 and changes nothing', async () => {
    const d = await domain('apr');
    const created = await t.call('POST', '/approvals', {
      domain_id: d.id,
      title: 'deploy?',
      agent_id: 'ag1',
    });
    expect(created.status).toBe(201);
    expect(created.body).toMatchObject({ status: 'pending', title: 'deploy?', detail: '', decided_at: null });
    const id = created.body.id as string;
    const ok = await t.call('POST', `/approvals/${id}/approve`, { reason: 'looks fine' });
    expect(ok.status).toBe(200);
    expect(ok.body).toMatchObject({
      status: 'approved',
      reason: 'looks fine',
      decided_by: 'admin (bootstrap)',
    });
    for (const again of ['approve', 'reject']) {
      const r = await t.call('POST', `/approvals/${id}/${again}`, {});
      expect(r.status).toBe(409);
      expect(r.body.code).toBe('already_decided');
    }
    expect((await t.call('GET', `/approvals/${id}`)).body).toMatchObject({
      status: 'approved',
      reason: 'looks fine',
    });
    const pending = await t.call('GET', `/approvals?domain_id=${d.id}&status=pending`);
    expect(pending.body.items).toEqual([]);
    const events = await eventsOf('approval');
    expect(events.filter((e) => e.payload.id === id).map((e) => e.status)).toEqual(['pending', 'approved']);
  });

  it('hides approvals of other domains and refuses unknown ones', async () => {
    const a = await domain('apr-a');
    const b = await domain('apr-b');
    const inB = await t.call('POST', '/approvals', { domain_id: b.id, title: 'b' });
    const tok = (await t.call('POST', '/tokens', { name: 'apr-a', scopes: ['work:write'], domains: [a.id] }))
      .body.token as string;
    expect((await t.call('GET', `/approvals/${inB.body.id}`, undefined, tok)).status).toBe(404);
    expect((await t.call('POST', `/approvals/${inB.body.id}/reject`, {}, tok)).status).toBe(404);
    expect((await t.call('POST', '/approvals', { domain_id: b.id, title: 'x' }, tok)).status).toBe(404);
    expect((await t.call('GET', '/approvals', undefined, tok)).body.items).toEqual([]);
    expect((await t.call('POST', '/approvals/apr_nope/approve', {})).status).toBe(404);
    expect((await t.call('POST', '/approvals', { domain_id: a.id })).status).toBe(400);
  });

  it('pages approvals by cursor within the domains a token may see', async () => {
    const a = await domain('page-a');
    const b = await domain('page-b');
    const mine: string[] = [];
    for (let i = 0; i < 5; i++) {
      mine.push((await t.call('POST', '/approvals', { domain_id: a.id, title: `a${i}` })).body.id as string);
      await t.call('POST', '/approvals', { domain_id: b.id, title: `b${i}` });
    }
    const tok = (await t.call('POST', '/tokens', { name: 'page-a', scopes: ['feed:read'], domains: [a.id] }))
      .body.token as string;
    const seen: string[] = [];
    let cursor: string | null = null;
    do {
      const q: string = cursor ? `&cursor=${cursor}` : '';
      const r = await t.call('GET', `/approvals?limit=2${q}`, undefined, tok);
      expect(r.status).toBe(200);
      expect((r.body.items as unknown[]).length).toBeLessThanOrEqual(2);
      seen.push(...(r.body.items as { id: string }[]).map((x) => x.id));
      cursor = r.body.next_cursor as string | null;
    } while (cursor);
    expect(seen).toEqual(mine);
    expect((await t.call('GET', `/approvals?domain_id=${b.id}`, undefined, tok)).body.items).toEqual([]);
    expect((await t.call('GET', '/approvals?cursor=%25%25')).status).toBe(400);
  });

  it('sends inbox messages to agents and lists them per agent', async () => {
    const d = await domain('inbox');
    const noDomain = await t.call('POST', '/inbox', { agent_id: 'ghost', text: 'hi' });
    expect(noDomain.status).toBe(404);
    expect(noDomain.body.code).toBe('agent_not_found');
    const sent = await t.call('POST', '/inbox', { agent_id: 'ag7', text: 'please rebase', domain_id: d.id });
    expect(sent.status).toBe(201);
    expect(sent.body).toMatchObject({
      agent_id: 'ag7',
      text: 'please rebase',
      sent_by: 'admin (bootstrap)',
      domain_id: d.id,
    });
    await t.call('POST', '/inbox', { agent_id: 'ag8', text: 'other', domain_id: d.id });
    const list = await t.call('GET', '/inbox?agent_id=ag7');
    expect((list.body.items as { text: string }[]).map((m) => m.text)).toEqual(['please rebase']);
    const events = await eventsOf('inbox');
    expect(events.some((e) => e.payload.text === 'please rebase')).toBe(true);
  });
});

describe.each(STORES)('approvals a task subagent asks for on %s', (store) => {
  let t: TestTower;
  let base: string;
  beforeAll(async () => {
    t = await startTestTower(store);
    base = (await t.tower.listen('127.0.0.1', 0)).replace('http', 'ws');
  });
  afterAll(async () => {
    await t?.close();
  });

  const toolCall = {
    kind: 'execute',
    title: 'Run npm test',
    input: '{"command":"npm test"}',
    options: [
      { option_id: 'allow', name: 'Allow', kind: 'allow_once' },
      { option_id: 'reject', name: 'Reject', kind: 'reject_once' },
    ],
    rule: 'default (safe)',
  };

  it('records the task, node and tool call, and tells the node the decision on its channel', async () => {
    const f = await meshFixture(t, `ask-${store}`);
    const ws = new WebSocket(`${base}/nodes/connect`, { headers: { authorization: `Bearer ${f.node.jwt}` } });
    const got: Record<string, unknown>[] = [];
    ws.on('message', (d) => got.push(JSON.parse(String(d)) as Record<string, unknown>));
    await new Promise((res, rej) => {
      ws.once('open', res);
      ws.once('error', rej);
    });
    ws.send(JSON.stringify({ type: 'hello', version: 'test', attach_secret: 'a'.repeat(64) }));
    await waitFor('welcome', () => got.find((m) => m.type === 'welcome'));

    const created = await t.call(
      'POST',
      '/approvals',
      {
        domain_id: f.domainId,
        mission_id: f.missionId,
        agent_id: f.agentId,
        task_id: 'mt_1',
        title: 'Run npm test',
        tool_call: toolCall,
      },
      f.node.jwt,
    );
    expect(created.status).toBe(201);
    expect(created.body).toMatchObject({ task_id: 'mt_1', node_id: f.node.id, tool_call: toolCall });
    const id = created.body.id as string;
    expect((await t.call('GET', `/approvals?task_id=mt_1&domain_id=${f.domainId}`)).body.items).toHaveLength(
      1,
    );

    // The node may not approve what its own agent asked; an operator does.
    const self = await t.call('POST', `/approvals/${id}/approve`, {}, f.node.jwt);
    expect(self.status).toBe(403);
    const ok = await t.call('POST', `/approvals/${id}/approve`, { reason: 'fine' });
    expect(ok.status).toBe(200);
    await waitFor('approval_decided', () => got.find((m) => m.type === 'approval_decided'));
    expect(got.find((m) => m.type === 'approval_decided')).toEqual({
      type: 'approval_decided',
      approval_id: id,
      status: 'approved',
      reason: 'fine',
    });
    const events = await t.tower.store.db
      .selectFrom('events')
      .select(['status', 'payload'])
      .where('type', '=', 'approval')
      .where('domain_id', '=', f.domainId)
      .orderBy('id')
      .execute();
    expect(
      events.map((e) => [e.status, JSON.parse(e.payload).task_id, JSON.parse(e.payload).tool_call]),
    ).toEqual([
      ['pending', 'mt_1', { kind: 'execute', title: 'Run npm test' }],
      ['approved', 'mt_1', { kind: 'execute', title: 'Run npm test' }],
    ]);
    ws.close();
  });

  it('decides over MCP: approve_approval, reject_approval and get_approval; a node cannot approve', async () => {
    const f = await meshFixture(t, `mcp-${store}`);
    const mcp = async (tool: string, args: Record<string, unknown>, token?: string) => {
      const r = await t.call('POST', '/mcp/call', { tool, args }, token);
      return { status: r.status, code: r.body.code, result: r.body.result as Record<string, unknown> };
    };
    const asked = await mcp('request_approval', { domain_id: f.domainId, title: 'run it' }, f.node.jwt);
    const id = asked.result.id as string;
    expect((await mcp('approve_approval', { approval_id: id }, f.node.jwt)).status).toBe(403);
    const ok = await mcp('approve_approval', { approval_id: id, reason: 'fine' });
    expect(ok.result).toMatchObject({ id, status: 'approved', reason: 'fine' });
    expect((await mcp('get_approval', { approval_id: id })).result.status).toBe('approved');
    const again = await mcp('reject_approval', { approval_id: id });
    expect(again.code).toBe('already_decided');
  });

  it('lets the node reject (its timeout) and refuses a tool call of an unknown kind', async () => {
    const f = await meshFixture(t, `rej-${store}`);
    const bad = await t.call(
      'POST',
      '/approvals',
      { domain_id: f.domainId, title: 'x', tool_call: { ...toolCall, kind: 'teleport' } },
      f.node.jwt,
    );
    expect(bad.status).toBe(400);
    const a = await t.call(
      'POST',
      '/approvals',
      { domain_id: f.domainId, title: 'x', tool_call: toolCall },
      f.node.jwt,
    );
    const r = await t.call(
      'POST',
      `/approvals/${a.body.id}/reject`,
      { reason: 'no answer within 10m' },
      f.node.jwt,
    );
    expect(r.body).toMatchObject({ status: 'rejected', reason: 'no answer within 10m' });
  });
});
