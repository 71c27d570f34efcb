import { Validator } from '@seriousme/openapi-schema-validator';
import type { RouteOptions } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestTower, type TestTower } from '../../../test/support/tower.js';
import { OPENAPI_PATH, openapiPath } from './openapi.js';

interface Operation {
  responses: Record<string, { content?: Record<string, { schema?: { $ref?: string } }> }>;
  security?: unknown[];
}
interface Document {
  openapi: string;
  paths: Record<string, Record<string, Operation>>;
  components: { schemas: Record<string, unknown> };
}

/** Every (method, route) the app serves, as its onRoute hook saw them; HEAD routes are Fastify's own. */
function served(routes: RouteOptions[]): { method: string; route: RouteOptions }[] {
  return routes.flatMap((route) =>
    (Array.isArray(route.method) ? route.method : [route.method])
      .filter((m) => m !== 'HEAD')
      .map((method) => ({ method: method.toLowerCase(), route })),
  );
}

describe('the OpenAPI document', () => {
  let t: TestTower;
  let doc: Document;
  const routes: RouteOptions[] = [];

  beforeAll(async () => {
    t = await startTestTower('sqlite', { onRoute: (r) => routes.push(r) });
    const res = await t.call('GET', OPENAPI_PATH, undefined, null);
    expect(res.status).toBe(200);
    doc = res.body as unknown as Document;
  });
  afterAll(async () => {
    await t?.close();
  });

  it('is served without a credential and is a valid OpenAPI 3.1 document', async () => {
    expect(doc.openapi).toBe('3.1.0');
    const result = await new Validator().validate(doc as never);
    expect(result.errors ?? []).toEqual([]);
    expect(result.valid).toBe(true);
  });

  it('describes every route of the app, each with its response schemas', () => {
    const all = served(routes);
    expect(all.length).toBeGreaterThan(50);
    const missing = all.filter(({ method, route }) => !doc.paths[openapiPath(route.url)]?.[method]);
    expect(missing.map(({ method, route }) => `${method} ${route.url}`)).toEqual([]);
    const unschemed = all.filter(
      ({ route }) => !(route.schema as { response?: unknown } | undefined)?.response,
    );
    expect(unschemed.map(({ method, route }) => `${method} ${route.url}`)).toEqual([]);
    const documented = Object.values(doc.paths).reduce((n, p) => n + Object.keys(p).length, 0);
    expect(documented).toBe(all.length);
  });

  it('gives every route a success answer and problem+json errors with the shared Problem schema', () => {
    expect(doc.components.schemas.Problem).toMatchObject({ type: 'object' });
    for (const { method, route } of served(routes)) {
      const op = doc.paths[openapiPath(route.url)]?.[method] as Operation;
      const statuses = Object.keys(op.responses);
      expect(
        statuses.some((s) => /^(1|2|3)\d\d$/.test(s)),
        `${method} ${route.url}`,
      ).toBe(true);
      for (const s of ['400', '500', '503']) {
        expect(
          op.responses[s]?.content?.['application/problem+json']?.schema,
          `${method} ${route.url} ${s}`,
        ).toEqual({
          $ref: '#/components/schemas/Problem',
        });
      }
    }
  });

  it('marks exactly the routes configured public as needing no credential', () => {
    for (const { method, route } of served(routes)) {
      const op = doc.paths[openapiPath(route.url)]?.[method] as Operation;
      const isPublic = (route.config as { scope?: string } | undefined)?.scope === 'public';
      expect({ route: `${method} ${route.url}`, public: op.security?.length === 0 }).toEqual({
        route: `${method} ${route.url}`,
        public: isPublic,
      });
      expect(op.responses['401'] === undefined, `${method} ${route.url}`).toBe(isPublic);
    }
  });
});
