// The routes' real answers match their response schemas exactly, on both stores. A checking
// serializer stands in for fast-json-stringify: it validates every JSON body a route sends
// against the route's schema for that status with every object closed, so a field the schema
// does not name (which the real serializer would drop) fails as surely as a wrong type.
import type { RouteOptions } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { STORES, startTestTower, type TestTower } from '../../../test/support/tower.js';
import { ProblemSchema } from '../../protocol/errors.js';
import { PROBLEM_ID } from './route-schema.js';
import { makeAjv } from './validation.js';

const SUBSCHEMA_LISTS = ['anyOf', 'oneOf', 'allOf'];

/** A copy of `schema` in which objects that do not say otherwise refuse unknown fields. */
function closed(schema: unknown): unknown {
  if (Array.isArray(schema)) return schema.map(closed);
  if (typeof schema !== 'object' || schema === null) return schema;
  const s = schema as Record<string, unknown>;
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(s)) {
    if (k === 'properties' || k === 'patternProperties') {
      out[k] = Object.fromEntries(Object.entries(v as object).map(([n, sub]) => [n, closed(sub)]));
    } else if (k === 'items' || k === 'additionalProperties' || SUBSCHEMA_LISTS.includes(k)) {
      out[k] = closed(v);
    } else out[k] = v;
  }
  if (s.type === 'object' && s.properties && !('additionalProperties' in s) && !s.patternProperties) {
    out.additionalProperties = false;
  }
  return out;
}

interface Mismatch {
  route: string;
  status: number | string;
  errors: unknown;
}

describe.each(STORES)('route answers against their response schemas on %s', (store) => {
  let t: TestTower;
  const ajv = makeAjv(false);
  ajv.addSchema(closed({ ...ProblemSchema, $id: PROBLEM_ID }) as object);
  const mismatches: Mismatch[] = [];
  const checked = new Set<string>();
  const compiled = new Map<string, ReturnType<typeof ajv.compile>>();

  /** Replaces the route's serializer with one that checks (relayed routes keep their own). */
  function checking(r: RouteOptions): void {
    if (r.serializerCompiler) return;
    const route = `${String(r.method)} ${r.url}`;
    r.serializerCompiler = ({ schema, httpStatus }) => {
      const key = JSON.stringify(schema);
      const validate = compiled.get(key) ?? ajv.compile(closed(schema) as object);
      compiled.set(key, validate);
      return (data: unknown) => {
        checked.add(`${route} ${httpStatus}`);
        if (!validate(data)) mismatches.push({ route, status: httpStatus ?? '?', errors: validate.errors });
        return JSON.stringify(data);
      };
    };
  }

  beforeAll(async () => {
    t = await startTestTower(store, { onRoute: checking });
  });
  afterAll(async () => {
    await t?.close();
  });

  it('sends every field its schema names and no other, for each area and its errors', async () => {
    const ok = async (method: string, url: string, body?: unknown, token?: string | null) => {
      const res = await t.call(method, url, body, token);
      expect(res.status, `${method} ${url}: ${JSON.stringify(res.body)}`).toBeLessThan(300);
      return res.body as Record<string, unknown> & { id: string };
    };
    await ok('GET', '/healthz', undefined, null);
    await ok('GET', '/readyz', undefined, null);

    // records
    const d = await ok('POST', '/domains', { name: 'answers', description: 'd' });
    const m = await ok('POST', `/domains/${d.id}/m`, { name: 'm', repository: 'git@x:y' });
    const base = `/domains/${d.id}/m/${m.id}`;
    const task = await ok('POST', `${base}/t`, { title: 't' });
    const doc = await ok('POST', `${base}/documents`, { title: 'doc', content: '# hi' });
    const art = await ok('POST', `${base}/artifacts`, { name: 'a', size_bytes: 12, metadata: { k: [1] } });
    for (const path of [
      '/domains',
      `/domains/${d.id}/m`,
      `${base}/t`,
      `${base}/documents`,
      `${base}/artifacts`,
    ]) {
      await ok('GET', path);
    }
    await ok('GET', `/domains/${d.id}`);
    await ok('PATCH', `${base}/t/${task.id}`, { status: 'doing' });
    await ok('GET', `${base}/documents/${doc.id}`);
    await ok('PATCH', `${base}/artifacts/${art.id}`, { uri: 's3://b/k' });

    // credentials and nodes
    const token = await ok('POST', '/tokens', { name: 'r', scopes: ['feed:read'], ttl_seconds: 60 });
    await ok('GET', '/tokens');
    await ok('DELETE', `/tokens/${token.id}`);
    await ok('GET', '/admin/signing-keys');
    const kid = (await ok('POST', '/admin/signing-keys/rotate')).kid as string;
    const node = (await ok('POST', '/nodes', { hostname: `answers-${store}` })) as {
      id: string;
      jwt: string;
    };
    await ok('GET', '/nodes');
    await ok('GET', `/nodes/${node.id}`);
    const keys = (await ok('GET', '/admin/signing-keys')).items as { kid: string; active: boolean }[];
    const older = keys.find((k) => !k.active && k.kid !== kid);
    if (older) await ok('POST', `/admin/signing-keys/${older.kid}/retire`);

    // agents, mesh tasks, node events
    const agent = await ok(
      'POST',
      '/agents',
      { domain_id: d.id, runtime: 'beta_cli', capabilities: ['x'] },
      node.jwt,
    );
    await ok('GET', '/agents');
    await ok('GET', `/agents/${agent.id}`);
    const mt = await ok('POST', `/work/missions/${m.id}/tasks`, { title: 'mesh', priority: 2 });
    await ok('GET', `/work/missions/${m.id}/tasks`);
    await ok('GET', `/work/tasks/${mt.id}`);
    await ok('POST', `/work/tasks/${mt.id}/cancel`);
    await ok('POST', '/mcp/call', { tool: 'list_mesh_tasks', args: { mission_id: m.id } }, node.jwt);
    await ok(
      'POST',
      '/nodes/events',
      { events: [{ key: 'k1', type: 'progress', payload: { pct: 5 } }] },
      node.jwt,
    );

    // approvals and inbox
    const ap = await ok('POST', '/approvals', { domain_id: d.id, mission_id: m.id, title: 'ship?' });
    await ok('GET', '/approvals');
    await ok('GET', `/approvals/${ap.id}`);
    await ok('POST', `/approvals/${ap.id}/approve`, { reason: 'yes' });
    await ok('POST', '/inbox', { agent_id: agent.id, text: 'hello' });
    await ok('GET', '/inbox');

    // secrets
    const q = `?domain_id=${d.id}`;
    await ok('PUT', `/secrets/TOKEN${q}`, { value: 'v1', description: 'ci' });
    await ok('PUT', `/secrets/TOKEN${q}`, { value: 'v2' });
    await ok('GET', `/secrets/TOKEN${q}`);
    await ok('GET', '/secrets');
    await ok('POST', `/secrets/TOKEN/grants${q}`, { agent_id: agent.id });
    await ok('POST', `/secrets/TOKEN/fetch`, { agent_id: agent.id }, node.jwt);
    await ok('POST', `/secrets/TOKEN/rollback${q}`, { version: 1 });
    await ok('DELETE', `/secrets/TOKEN/grants/${agent.id}${q}`);
    await ok('GET', '/admin/master-key');

    // errors: not found, validation, conflict, unauthenticated, forbidden
    expect((await t.call('GET', `/work/tasks/nope`)).status).toBe(404);
    expect((await t.call('POST', '/domains', { name: '' })).status).toBe(400);
    expect((await t.call('POST', `/approvals/${ap.id}/reject`, {})).status).toBe(409);
    expect((await t.call('GET', '/tokens', undefined, null)).status).toBe(401);
    expect((await t.call('POST', '/agents', { domain_id: d.id, runtime: 'beta_cli' })).status).toBe(403);
    expect((await t.call('DELETE', `/domains/${d.id}`)).status).toBe(409);

    await ok('DELETE', `${base}/documents/${doc.id}`);
    await ok('DELETE', `/domains/${d.id}?cascade=true`);

    expect(mismatches).toEqual([]);
    expect(checked.size).toBeGreaterThan(50);
  });
});
