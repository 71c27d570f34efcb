import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { STORES, startTestTower, type TestTower } from '../../../test/support/tower.js';

describe.each(STORES)('records on %s', (store) => {
  let t: TestTower;
  beforeAll(async () => {
    t = await startTestTower(store);
  });
  afterAll(async () => {
    await t.close();
  });

  async function domain(name = 'ops') {
    const res = await t.call('POST', '/domains', { name, description: 'd' });
    expect(res.status).toBe(201);
    return res.body as { id: string; name: string };
  }

  it('creates, reads, updates and deletes a domain', async () => {
    const d = await domain('crud');
    expect(d.id).toMatch(/^dom_/);
    const got = await t.call('GET', `/domains/${d.id}`);
    expect(got.status).toBe(200);
    expect(got.body).toEqual(d);
    const patched = await t.call('PATCH', `/domains/${d.id}`, { description: 'new' });
    expect(patched.status).toBe(200);
    expect(patched.body.description).toBe('new');
    expect(patched.body.name).toBe('crud');
    expect((await t.call('DELETE', `/domains/${d.id}`)).status).toBe(204);
    expect((await t.call('GET', `/domains/${d.id}`)).status).toBe(404);
  });

  it('round-trips missions, regular tasks, documents and artifacts under a domain', async () => {
    const d = await domain('tree');
    const m = await t.call('POST', `/domains/${d.id}/m`, { name: 'm1', repository: '/srv/repo' });
    expect(m.status).toBe(201);
    expect(m.body).toMatchObject({ domain_id: d.id, name: 'm1', description: '', repository: '/srv/repo' });
    const mid = m.body.id as string;
    const base = `/domains/${d.id}/m/${mid}`;

    const task = await t.call('POST', `${base}/t`, { title: 'write docs' });
    expect(task.status).toBe(201);
    expect(task.body).toMatchObject({
      mission_id: mid,
      domain_id: d.id,
      title: 'write docs',
      status: 'todo',
    });
    const moved = await t.call('PATCH', `${base}/t/${task.body.id}`, { status: 'doing' });
    expect(moved.body.status).toBe('doing');

    const doc = await t.call('POST', `${base}/documents`, { title: 'plan', content: '# Plan' });
    expect(doc.body).toMatchObject({ title: 'plan', content: '# Plan', content_type: 'text/markdown' });
    const art = await t.call('POST', `${base}/artifacts`, {
      name: 'build.tgz',
      size_bytes: 1234,
      metadata: { sha: 'abc' },
    });
    expect(art.body).toMatchObject({
      name: 'build.tgz',
      size_bytes: 1234,
      metadata: { sha: 'abc' },
      uri: null,
    });
    expect((await t.call('GET', `${base}/artifacts/${art.body.id}`)).body).toEqual(art.body);

    // The mission has children: deleting it needs cascade.
    const refused = await t.call('DELETE', `/domains/${d.id}/m/${mid}`);
    expect(refused.status).toBe(409);
    expect(refused.body.code).toBe('conflict');
    expect((await t.call('GET', `${base}/t/${task.body.id}`)).status).toBe(200);
    expect((await t.call('DELETE', `/domains/${d.id}/m/${mid}?cascade=true`)).status).toBe(204);
    expect((await t.call('GET', `${base}/t/${task.body.id}`)).status).toBe(404);
  });

  it('a record is only found under its own parents', async () => {
    const a = await domain('a');
    const b = await domain('b');
    const m = await t.call('POST', `/domains/${a.id}/m`, { name: 'm' });
    expect((await t.call('GET', `/domains/${b.id}/m/${m.body.id}`)).status).toBe(404);
    expect((await t.call('POST', `/domains/${b.id}/m/${m.body.id}/t`, { title: 'x' })).status).toBe(404);
  });

  it('creating under a parent that does not exist is 404 and writes nothing', async () => {
    const a = await domain('gate');
    const count = async () =>
      ((await t.call('GET', `/domains/${a.id}/m`)).body as { items: unknown[] }).items.length;
    const before = await count();
    const noDomain = await t.call('POST', '/domains/dom_nope/m', { name: 'm' });
    expect(noDomain.status).toBe(404);
    expect(noDomain.body.detail).toBe('domain dom_nope not found');
    const noMission = await t.call('POST', `/domains/${a.id}/m/mis_nope/t`, { title: 'x' });
    expect(noMission.status).toBe(404);
    expect(noMission.body.detail).toBe('mission mis_nope not found');
    expect(await count()).toBe(before);
    const m = await t.call('POST', `/domains/${a.id}/m`, { name: 'ok' });
    expect(m.status).toBe(201);
    expect((await t.call('POST', `/domains/${a.id}/m/${m.body.id}/t`, { title: 'x' })).status).toBe(201);
  });

  it('pages through a list with cursors, each item exactly once', async () => {
    const d = await domain('paging');
    const names: string[] = [];
    for (let i = 0; i < 7; i++) {
      const name = `m${i}`;
      names.push(name);
      await t.call('POST', `/domains/${d.id}/m`, { name });
    }
    const seen: string[] = [];
    let cursor: string | null = null;
    let pages = 0;
    do {
      const q: string = cursor ? `&cursor=${cursor}` : '';
      const res = await t.call('GET', `/domains/${d.id}/m?limit=3${q}`);
      expect(res.status).toBe(200);
      const body = res.body as { items: { name: string }[]; next_cursor: string | null };
      seen.push(...body.items.map((m) => m.name));
      cursor = body.next_cursor;
      pages++;
    } while (cursor);
    expect(seen).toEqual(names);
    expect(pages).toBe(3);
  });

  it('rejects bad input with the field named and writes nothing', async () => {
    const before = (await t.call('GET', '/domains?limit=500')).body.items as unknown[];
    const cases: [unknown, number, string, string][] = [
      ['{"name":', 400, 'invalid_json', ''],
      [{ name: 'x', bogus: 1 }, 400, 'validation_failed', 'body/bogus'],
      [{ name: 42 }, 400, 'validation_failed', 'body/name'],
      [{}, 400, 'validation_failed', 'body/name'],
      [{ name: 'x'.repeat(201) }, 400, 'validation_failed', 'body/name'],
    ];
    for (const [body, status, code, field] of cases) {
      const res = await t.call('POST', '/domains', body);
      expect(res.status, JSON.stringify(body)).toBe(status);
      expect(res.headers['content-type']).toContain('application/problem+json');
      expect(res.body.code).toBe(code);
      if (field) expect((res.body.errors as { field: string }[])[0]?.field).toBe(field);
      if (field) expect(res.body.detail).toContain(field);
    }
    const big = { name: 'big', description: 'x'.repeat(1024 * 1024 + 10) };
    const tooBig = await t.call('POST', '/domains', big);
    expect(tooBig.status).toBe(413);
    expect(tooBig.body.code).toBe('payload_too_large');
    const after = (await t.call('GET', '/domains?limit=500')).body.items as unknown[];
    expect(after).toEqual(before);
  });

  it('rejects a cursor it did not issue', async () => {
    const res = await t.call('GET', '/domains?cursor=%21%21%21');
    expect(res.status).toBe(400);
    expect(res.body.code).toBe('validation_failed');
  });

  it('answers unknown ids and routes with 404 problems', async () => {
    const res = await t.call('GET', '/domains/dom_nope');
    expect(res.status).toBe(404);
    expect(res.body).toMatchObject({ code: 'not_found', status: 404, detail: 'domain dom_nope not found' });
    expect((await t.call('GET', '/nothing-here')).body.code).toBe('not_found');
  });

  it('writes a matrix event in the same transaction as each change', async () => {
    const d = await domain('events');
    const m = await t.call('POST', `/domains/${d.id}/m`, { name: 'watched' });
    const rows = await t.tower.store.db
      .selectFrom('events')
      .selectAll()
      .where('mission_id', '=', m.body.id as string)
      .execute();
    expect(rows).toHaveLength(1);
    expect(rows[0]).toMatchObject({ type: 'matrix', domain_id: d.id });
    expect(JSON.parse(rows[0]!.payload)).toEqual({
      entity: 'mission',
      action: 'created',
      id: m.body.id,
      name: 'watched',
    });
  });
});
