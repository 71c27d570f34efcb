import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { STORES, startTestTower, type TestTower } from '../../../test/support/tower.js';

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
