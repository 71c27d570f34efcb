import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { STORES, startTestTower, type TestTower } from '../../../test/support/tower.js';
import type { AgentLookup, EnrolledAgent } from './agents.js';
import { keyIdOf } from './crypto.js';
import { parseKeyList } from './master-key.js';

const VALUE = 'sk-live-7f3a9c1e-VERY-SECRET-VALUE';
const VALUE2 = 'sk-live-second-version-9d8e7f';

describe.each(STORES)('secrets on %s', (store) => {
  let t: TestTower;
  const agents = new Map<string, EnrolledAgent>();
  const lookup: AgentLookup = async (_db, id) => agents.get(id) ?? null;
  let domainId: string;
  let otherDomainId: string;
  let nodeJwt: string;
  let nodeId: string;
  let otherNodeJwt: string;

  beforeAll(async () => {
    t = await startTestTower(store, { agentLookup: lookup });
    domainId = (await t.call('POST', '/domains', { name: 'ops' })).body.id as string;
    otherDomainId = (await t.call('POST', '/domains', { name: 'other' })).body.id as string;
    const node = await t.call('POST', '/nodes', { hostname: 'node-a' });
    nodeJwt = node.body.jwt as string;
    nodeId = node.body.id as string;
    const other = await t.call('POST', '/nodes', { hostname: 'node-b' });
    otherNodeJwt = other.body.jwt as string;
    agents.set('agt_a', { id: 'agt_a', node_id: nodeId, domain_id: domainId });
    agents.set('agt_b', { id: 'agt_b', node_id: nodeId, domain_id: domainId });
    agents.set('agt_far', { id: 'agt_far', node_id: other.body.id as string, domain_id: domainId });
    agents.set('agt_x', { id: 'agt_x', node_id: nodeId, domain_id: otherDomainId });
  });
  afterAll(async () => {
    await t.close();
  });

  const q = (d = domainId) => `?domain_id=${d}`;
  const fetchAs = (jwt: string, name: string, agentId: string) =>
    t.call('POST', `/secrets/${name}/fetch`, { agent_id: agentId }, jwt);

  async function allEvents(): Promise<string> {
    const rows = await t.tower.store.db.selectFrom('events').selectAll().orderBy('id').execute();
    return JSON.stringify(rows);
  }

  it('stores a value write-only: versions and metadata come back, the value never does', async () => {
    const created = await t.call('PUT', `/secrets/API_TOKEN${q()}`, {
      value: VALUE,
      description: 'ci token',
    });
    expect(created.status).toBe(201);
    expect(created.body).toMatchObject({
      domain_id: domainId,
      name: 'API_TOKEN',
      description: 'ci token',
      version: 1,
      grants: [],
    });
    expect((created.body.versions as { version: number }[]).map((v) => v.version)).toEqual([1]);
    const updated = await t.call('PUT', `/secrets/API_TOKEN${q()}`, { value: VALUE2 });
    expect(updated.status).toBe(200);
    expect(updated.body.version).toBe(2);
    expect(updated.body.description).toBe('ci token');
    expect((updated.body.versions as { version: number }[]).map((v) => v.version)).toEqual([2, 1]);
    const got = await t.call('GET', `/secrets/API_TOKEN${q()}`);
    expect(got.body).toEqual(updated.body);
    const list = await t.call('GET', `/secrets${q()}`);
    expect((list.body.items as { name: string }[]).map((s) => s.name)).toEqual(['API_TOKEN']);
    for (const text of [created, updated, got, list].map((r) => JSON.stringify(r.body))) {
      expect(text).not.toContain(VALUE);
      expect(text).not.toContain(VALUE2);
    }
    const events = await allEvents();
    expect(events).toContain('"action\\":\\"set\\"');
    expect(events).not.toContain(VALUE);
    expect(events).not.toContain(VALUE2);
  });

  it('keeps only ciphertext in the store', async () => {
    await t.call('PUT', `/secrets/AT_REST${q()}`, { value: VALUE });
    const rows = await t.tower.store.db
      .selectFrom('secret_versions' as 'events')
      .selectAll()
      .execute();
    expect(rows.length).toBeGreaterThan(0);
    expect(JSON.stringify(rows)).not.toContain(VALUE);
    if (store === 'sqlite') {
      for (const f of readdirSync(t.dataDir)) {
        const p = join(t.dataDir, f);
        if (statSync(p).isFile()) expect(readFileSync(p).includes(Buffer.from(VALUE)), f).toBe(false);
      }
    }
  });

  it('gives a node the value only for an agent enrolled on it and granted, auditing every fetch', async () => {
    await t.call('PUT', `/secrets/DB_PASSWORD${q()}`, { value: VALUE });
    const grant = await t.call('POST', `/secrets/DB_PASSWORD/grants${q()}`, { agent_id: 'agt_a' });
    expect(grant.status).toBe(201);
    expect(grant.body.agent_id).toBe('agt_a');
    expect((await t.call('POST', `/secrets/DB_PASSWORD/grants${q()}`, { agent_id: 'agt_a' })).status).toBe(
      200,
    );

    const ok = await fetchAs(nodeJwt, 'DB_PASSWORD', 'agt_a');
    expect(ok.status).toBe(200);
    expect(ok.body).toEqual({ name: 'DB_PASSWORD', domain_id: domainId, version: 1, value: VALUE });
    expect(ok.headers['cache-control']).toBe('no-store');

    const cases: [string, string, string, number, string][] = [
      [nodeJwt, 'DB_PASSWORD', 'agt_b', 403, 'not_granted'],
      [nodeJwt, 'NO_SUCH', 'agt_a', 404, 'secret_not_found'],
      [nodeJwt, 'DB_PASSWORD', 'agt_unknown', 404, 'agent_not_found'],
      [otherNodeJwt, 'DB_PASSWORD', 'agt_a', 404, 'agent_not_found'],
      // agt_x lives in another domain, where DB_PASSWORD does not exist.
      [nodeJwt, 'DB_PASSWORD', 'agt_x', 404, 'secret_not_found'],
      [t.adminToken, 'DB_PASSWORD', 'agt_a', 403, 'forbidden'],
    ];
    for (const [jwt, name, agent, status, code] of cases) {
      const res = await fetchAs(jwt, name, agent);
      expect([res.status, res.body.code], `${name} for ${agent}`).toEqual([status, code]);
      expect(JSON.stringify(res.body)).not.toContain(VALUE);
    }

    const audit = (await t.tower.store.db.selectFrom('events').selectAll().orderBy('id').execute())
      .map((e) => ({ agent_id: e.agent_id, payload: JSON.parse(e.payload) as Record<string, unknown> }))
      .filter((e) => String(e.payload.action).startsWith('fetch'));
    expect(
      audit.map((e) => [e.agent_id, e.payload.action, e.payload.name, e.payload.reason ?? null]),
    ).toEqual([
      ['agt_a', 'fetched', 'DB_PASSWORD', null],
      ['agt_b', 'fetch_refused', 'DB_PASSWORD', 'not_granted'],
      ['agt_a', 'fetch_refused', 'NO_SUCH', 'secret_not_found'],
      ['agt_unknown', 'fetch_refused', 'DB_PASSWORD', 'agent_not_found'],
      ['agt_a', 'fetch_refused', 'DB_PASSWORD', 'agent_not_found'],
      ['agt_x', 'fetch_refused', 'DB_PASSWORD', 'secret_not_found'],
    ]);
    expect(audit[0]?.payload).toMatchObject({ node_id: nodeId, node: 'node-a', version: 1 });
    expect(await allEvents()).not.toContain(VALUE);
  });

  it('takes a revoked grant away at the next fetch', async () => {
    await t.call('PUT', `/secrets/REVOKED${q()}`, { value: VALUE });
    await t.call('POST', `/secrets/REVOKED/grants${q()}`, { agent_id: 'agt_a' });
    expect((await fetchAs(nodeJwt, 'REVOKED', 'agt_a')).status).toBe(200);
    expect((await t.call('DELETE', `/secrets/REVOKED/grants/agt_a${q()}`)).status).toBe(204);
    const refused = await fetchAs(nodeJwt, 'REVOKED', 'agt_a');
    expect([refused.status, refused.body.code]).toEqual([403, 'not_granted']);
    const again = await t.call('DELETE', `/secrets/REVOKED/grants/agt_a${q()}`);
    expect([again.status, again.body.code]).toEqual([404, 'not_found']);
  });

  it('serves the newest version and rolls back to a kept one as a new version', async () => {
    await t.call('PUT', `/secrets/ROLLING${q()}`, { value: 'one' });
    await t.call('PUT', `/secrets/ROLLING${q()}`, { value: 'two' });
    await t.call('POST', `/secrets/ROLLING/grants${q()}`, { agent_id: 'agt_a' });
    expect((await fetchAs(nodeJwt, 'ROLLING', 'agt_a')).body).toMatchObject({ version: 2, value: 'two' });
    const rolled = await t.call('POST', `/secrets/ROLLING/rollback${q()}`, { version: 1 });
    expect(rolled.status).toBe(200);
    expect(rolled.body.version).toBe(3);
    expect((await fetchAs(nodeJwt, 'ROLLING', 'agt_a')).body).toMatchObject({ version: 3, value: 'one' });
    const missing = await t.call('POST', `/secrets/ROLLING/rollback${q()}`, { version: 9 });
    expect([missing.status, missing.body.code]).toEqual([404, 'not_found']);
  });

  it('keeps the last ten versions', async () => {
    for (let i = 1; i <= 12; i++) await t.call('PUT', `/secrets/MANY${q()}`, { value: `v${i}` });
    const got = await t.call('GET', `/secrets/MANY${q()}`);
    expect(got.body.version).toBe(12);
    expect((got.body.versions as { version: number }[]).map((v) => v.version)).toEqual([
      12, 11, 10, 9, 8, 7, 6, 5, 4, 3,
    ]);
  });

  it('deletes a secret with its versions and grants', async () => {
    await t.call('PUT', `/secrets/GONE${q()}`, { value: VALUE });
    await t.call('POST', `/secrets/GONE/grants${q()}`, { agent_id: 'agt_a' });
    expect((await t.call('DELETE', `/secrets/GONE${q()}`)).status).toBe(204);
    expect((await t.call('GET', `/secrets/GONE${q()}`)).body.code).toBe('secret_not_found');
    expect((await fetchAs(nodeJwt, 'GONE', 'agt_a')).body.code).toBe('secret_not_found');
    expect((await t.call('DELETE', `/secrets/GONE${q()}`)).status).toBe(404);
  });

  it('scopes secrets to their domain', async () => {
    await t.call('PUT', `/secrets/SHARED_NAME${q()}`, { value: 'in ops' });
    await t.call('PUT', `/secrets/SHARED_NAME${q(otherDomainId)}`, { value: 'in other' });
    await t.call('POST', `/secrets/SHARED_NAME/grants${q(otherDomainId)}`, { agent_id: 'agt_x' });
    expect((await fetchAs(nodeJwt, 'SHARED_NAME', 'agt_x')).body.value).toBe('in other');
    const wrongDomain = await t.call('POST', `/secrets/SHARED_NAME/grants${q()}`, { agent_id: 'agt_x' });
    expect([wrongDomain.status, wrongDomain.body.code]).toEqual([409, 'conflict']);

    const scoped = await t.call('POST', '/tokens', {
      name: 'ops admin',
      scopes: ['admin'],
      domains: [domainId],
    });
    const token = scoped.body.token as string;
    const mine = await t.call('GET', '/secrets', undefined, token);
    expect((mine.body.items as { domain_id: string }[]).every((s) => s.domain_id === domainId)).toBe(true);
    expect((await t.call('GET', `/secrets/SHARED_NAME${q(otherDomainId)}`, undefined, token)).status).toBe(
      404,
    );
    expect((await t.call('GET', '/admin/master-key', undefined, token)).status).toBe(403);
    const reader = await t.call('POST', '/tokens', { name: 'reader', scopes: ['work:write'] });
    expect((await t.call('GET', `/secrets${q()}`, undefined, reader.body.token as string)).status).toBe(403);
    expect((await t.call('GET', `/secrets${q()}`, undefined, nodeJwt)).status).toBe(403);
  });

  it('rejects bad input with the field named', async () => {
    const cases: [string, string, unknown, number, string, string][] = [
      ['PUT', `/secrets/bad%20name${q()}`, { value: 'x' }, 400, 'validation_failed', 'params/name'],
      ['PUT', '/secrets/OK', { value: 'x' }, 400, 'validation_failed', 'querystring/domain_id'],
      ['PUT', `/secrets/OK${q()}`, { value: '' }, 400, 'validation_failed', 'body/value'],
      ['PUT', `/secrets/OK${q()}`, { value: 'x', extra: 1 }, 400, 'validation_failed', 'body/extra'],
      ['PUT', `/secrets/OK${q()}`, { value: 7 }, 400, 'validation_failed', 'body/value'],
      ['PUT', `/secrets/OK${q('dom_nope')}`, { value: 'x' }, 404, 'not_found', ''],
      ['PUT', `/secrets/OK${q()}`, { value: 'é'.repeat(40_000) }, 400, 'validation_failed', 'body/value'],
    ];
    for (const [method, url, body, status, code, field] of cases) {
      const res = await t.call(method, url, body);
      expect([res.status, res.body.code], url).toEqual([status, code]);
      if (field) expect((res.body.errors as { field: string }[])[0]?.field).toBe(field);
    }
    expect((await t.call('GET', `/secrets/OK${q()}`)).status).toBe(404);
    // A malformed body is refused without quoting any of it.
    const broken = await t.call('PUT', `/secrets/OK${q()}`, `{"value": ${VALUE}}`);
    expect([broken.status, broken.body.code]).toEqual([400, 'invalid_json']);
    expect(JSON.stringify(broken.body)).not.toContain(VALUE.slice(0, 8));
  });

  it('rotates the master key, re-encrypting every version, and keeps serving', async () => {
    await t.call('PUT', `/secrets/BEFORE_ROTATION${q()}`, { value: VALUE });
    await t.call('POST', `/secrets/BEFORE_ROTATION/grants${q()}`, { agent_id: 'agt_a' });
    const before = await t.call('GET', '/admin/master-key');
    const oldKeyId = before.body.key_id as string;
    const total = Object.values(before.body.versions_by_key as Record<string, number>).reduce(
      (a, b) => a + b,
      0,
    );
    expect(before.body).toMatchObject({ source: 'file', previous_key_ids: [] });
    const rotated = await t.call('POST', '/admin/master-key/rotate');
    expect(rotated.status).toBe(200);
    expect(rotated.body.previous_key_id).toBe(oldKeyId);
    expect(rotated.body.reencrypted).toBe(total);
    const after = await t.call('GET', '/admin/master-key');
    expect(after.body).toEqual({
      key_id: rotated.body.key_id,
      source: 'file',
      previous_key_ids: [],
      versions_by_key: { [rotated.body.key_id as string]: total },
      problem: null,
    });
    const file = parseKeyList(readFileSync(join(t.dataDir, 'master.key'), 'utf8'), 'master.key');
    expect(file.map(keyIdOf)).toEqual([rotated.body.key_id]);
    expect((statSync(join(t.dataDir, 'master.key')).mode & 0o777).toString(8)).toBe('600');
    expect((await fetchAs(nodeJwt, 'BEFORE_ROTATION', 'agt_a')).body.value).toBe(VALUE);
    await t.call('PUT', `/secrets/BEFORE_ROTATION${q()}`, { value: VALUE2 });
    expect((await fetchAs(nodeJwt, 'BEFORE_ROTATION', 'agt_a')).body.value).toBe(VALUE2);
  });
});
