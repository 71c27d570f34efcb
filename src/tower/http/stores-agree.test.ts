// Both stores answer every request the same way: the same random requests (valid ones and
// hostile ones — NUL in strings and path ids, numbers beyond a column's range, wrong types,
// odd Unicode) go to a tower on SQLite and one on PostgreSQL, in the same order, and must get
// the same status codes, never a 5xx. What one store would take and the other refuse is
// refused before it reaches either (http/validation.ts, protocol/common.ts ranges).
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { meshFixture, type StoreKind, startTestTower, type TestTower } from '../../../test/support/tower.js';

/** Ids of the records every request may name, per tower: a slot is written {D}, {M}, … */
type Slots = Record<string, string>;

interface Tower {
  kind: StoreKind;
  t: TestTower;
  slots: Slots;
  nodeJwt: string;
}

const HOSTILE_TEXT = [
  'a\u0000b',
  '\u0000',
  '',
  ' ',
  'x'.repeat(600),
  '😀 ünïcode',
  '\ud800',
  "'; drop table domains; --",
  '%00',
  'a/b',
  '..',
  'dom_does_not_exist',
];
const HOSTILE_NUMBERS = [
  0,
  -1,
  1.5,
  2 ** 31 - 1,
  2 ** 31,
  -(2 ** 31) - 1,
  Number.MAX_SAFE_INTEGER,
  2 ** 53 + 2,
  1e308,
  -1e308,
];
const hostile = fc.oneof(
  fc.constantFrom(...HOSTILE_TEXT),
  fc.constantFrom(...HOSTILE_NUMBERS),
  fc.constantFrom(null, true, [], {}, ['a\u0000'], { k: 'a\u0000b' }, [1, 2]),
);

const text = fc.string({ minLength: 1, maxLength: 12 });
/** Numbers: plausible ones, and (as often) the edges of the stores' integer columns. */
const nat = fc.oneof(fc.integer({ min: 0, max: 10_000 }), fc.constantFrom(...HOSTILE_NUMBERS));
/** A field's value: usually a plausible one, sometimes a hostile one. */
const field = (good: fc.Arbitrary<unknown>) =>
  fc.oneof({ weight: 3, arbitrary: good }, { weight: 2, arbitrary: hostile });
/** A body with some of `fields` (each plausible or hostile). */
const body = (fields: Record<string, fc.Arbitrary<unknown>>) =>
  fc.record(Object.fromEntries(Object.entries(fields).map(([k, v]) => [k, field(v)])), {
    requiredKeys: [],
  });
/** Path segments sent as they are, not encoded: bytes that are not UTF-8, an encoded NUL or slash. */
const RAW_SEGMENTS = ['%FF', '%00', '%ED%A0%80', '%2F', 'a%00b'].map((s) => `raw:${s}`);
/** A path id: one of the fixture's records, or something hostile. */
const id = (slot: string) =>
  fc.oneof(
    { weight: 3, arbitrary: fc.constant(`{${slot}}`) },
    { weight: 1, arbitrary: fc.constantFrom(...HOSTILE_TEXT, ...RAW_SEGMENTS) },
  );

/** A path segment, percent-encoded (a lone surrogate as the replacement character's bytes). */
function segment(s: string): string {
  if (s.startsWith('raw:')) return s.slice(4);
  try {
    return encodeURIComponent(s);
  } catch {
    return [...Buffer.from(s, 'utf8')].map((b) => `%${b.toString(16).padStart(2, '0')}`).join('');
  }
}

interface Request {
  /** Whose credential: the admin token (default) or the fixture node's JWT. */
  as?: 'node';
  method: string;
  /** With {slots}; each path segment is URL-encoded after the slots are filled. */
  path: string[];
  query?: Record<string, unknown>;
  body?: Record<string, unknown>;
}

const req = (
  method: string,
  path: fc.Arbitrary<string>[],
  b?: fc.Arbitrary<Record<string, unknown>>,
  query?: fc.Arbitrary<Record<string, unknown>>,
  as?: 'node',
): fc.Arbitrary<Request> =>
  fc.record({
    ...(as ? { as: fc.constant(as) } : {}),
    method: fc.constant(method),
    path: fc.tuple(...path),
    ...(b ? { body: b } : {}),
    ...(query ? { query } : {}),
  }) as fc.Arbitrary<Request>;

const c = fc.constant;
const REQUESTS: fc.Arbitrary<Request> = fc.oneof(
  req('POST', [c('domains')], body({ name: text, description: text })),
  req('PATCH', [c('domains'), id('D')], body({ name: text, description: text })),
  req('GET', [c('domains'), id('D')]),
  req('GET', [c('domains')], undefined, body({ limit: nat, cursor: text })),
  req('POST', [c('domains'), id('D'), c('m')], body({ name: text, description: text, repository: text })),
  req('GET', [c('domains'), id('D'), c('m'), id('M')]),
  req(
    'POST',
    [c('domains'), id('D'), c('m'), id('M'), c('t')],
    body({ title: text, description: text, status: fc.constantFrom('todo', 'doing', 'done') }),
  ),
  req(
    'PATCH',
    [c('domains'), id('D'), c('m'), id('M'), c('t'), id('T')],
    body({ title: text, status: fc.constantFrom('todo', 'doing', 'done') }),
  ),
  req(
    'POST',
    [c('domains'), id('D'), c('m'), id('M'), c('documents')],
    body({ title: text, content_type: text, content: text }),
  ),
  req(
    'POST',
    [c('domains'), id('D'), c('m'), id('M'), c('artifacts')],
    body({ name: text, uri: text, content_type: text, size_bytes: nat, metadata: fc.dictionary(text, text) }),
  ),
  req(
    'PATCH',
    [c('domains'), id('D'), c('m'), id('M'), c('artifacts'), id('A')],
    body({ name: text, size_bytes: nat }),
  ),
  req(
    'POST',
    [c('work'), c('missions'), id('M'), c('tasks')],
    body({
      title: text,
      description: text,
      claim_policy: c('first_claim'),
      priority: fc.integer({ min: -1000, max: 1000 }),
      max_attempts: fc.integer({ min: 1, max: 100 }),
      lease_seconds: fc.integer({ min: 5, max: 86_400 }),
      required_capabilities: fc.array(text, { maxLength: 3 }),
    }),
  ),
  req('GET', [c('work'), c('tasks'), id('K')]),
  req('POST', [c('work'), c('tasks'), id('K'), c('cancel')]),
  req('POST', [c('approvals')], body({ domain_id: c('{D}'), title: text, detail: text })),
  req('POST', [c('inbox')], body({ agent_id: c('{G}'), text })),
  req(
    'POST',
    [c('mcp'), c('call')],
    fc.record({
      tool: c('submit_mesh_task'),
      args: body({ mission_id: c('{M}'), title: text, description: text, priority: nat }),
    }),
  ),
  req('POST', [c('tokens')], body({ name: text, scopes: c(['feed:read']), ttl_seconds: nat })),
  req(
    'PUT',
    [c('secrets'), id('S')],
    body({ value: text, description: text }),
    fc.record({ domain_id: c('{D}') }),
  ),
  req(
    'POST',
    [c('secrets'), id('S'), c('rollback')],
    body({ version: nat }),
    fc.record({ domain_id: c('{D}') }),
  ),
  req('POST', [c('nodes')], body({ hostname: text })),
  req(
    'GET',
    [c('approvals')],
    undefined,
    body({ domain_id: id('D'), status: c('pending'), limit: nat, cursor: text }),
  ),
  req('POST', [c('approvals'), id('P'), c('approve')], body({ reason: text })),
  req('GET', [c('inbox')], undefined, body({ agent_id: id('G'), limit: nat })),
  req(
    'GET',
    [c('work'), c('missions'), id('M'), c('tasks')],
    undefined,
    body({ state: c('pending'), limit: nat, cursor: text }),
  ),
  req(
    'POST',
    [c('nodes'), c('events')],
    fc.record({
      events: fc.array(
        body({
          key: text,
          type: c('progress'),
          agent_id: text,
          status: text,
          payload: fc.dictionary(text, text),
        }),
        { minLength: 1, maxLength: 3 },
      ),
    }),
    undefined,
    'node',
  ),
  req(
    'POST',
    [c('mcp'), c('call')],
    fc.record({ tool: c('claim_mesh_task'), args: body({ agent_id: c('{G}') }) }),
    undefined,
    'node',
  ),
  req(
    'POST',
    [c('mcp'), c('call')],
    fc.record({
      tool: c('report_progress'),
      args: body({ task_id: c('{K}'), lease_id: text, message: text, percent: nat }),
    }),
    undefined,
    'node',
  ),
);

/** The request with this tower's ids in its slots (strings anywhere in path, query or body). */
function fill(r: Request, slots: Slots): { url: string; body?: unknown } {
  const sub = (v: unknown): unknown => {
    if (typeof v === 'string') return v.replace(/\{([A-Z])\}/g, (m, k: string) => slots[k] ?? m);
    if (Array.isArray(v)) return v.map(sub);
    if (v && typeof v === 'object') return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, sub(x)]));
    return v;
  };
  const path = r.path.map((seg) => segment(sub(seg) as string)).join('/');
  const q = r.query
    ? Object.entries(sub(r.query) as Record<string, unknown>)
        .map(([k, v]) => `${segment(k)}=${segment(typeof v === 'string' ? v : JSON.stringify(v))}`)
        .join('&')
    : '';
  return { url: `/${path}${q ? `?${q}` : ''}`, ...(r.body !== undefined ? { body: sub(r.body) } : {}) };
}

describe('both stores answer every request the same way', () => {
  const towers: Tower[] = [];

  beforeAll(async () => {
    for (const kind of ['sqlite', 'postgres'] as const) {
      const t = await startTestTower(kind, { rateLimit: { limit: 0, windowMs: 60_000 } });
      const f = await meshFixture(t, 'agree');
      const path = `/domains/${f.domainId}/m/${f.missionId}`;
      const made = async (method: string, url: string, b: unknown) => {
        const res = await t.call(method, url, b);
        if (res.status >= 300) throw new Error(`fixture ${url}: ${res.status} ${JSON.stringify(res.body)}`);
        return res.body.id as string;
      };
      const slots: Slots = {
        D: f.domainId,
        M: f.missionId,
        G: f.agentId,
        T: await made('POST', `${path}/t`, { title: 't' }),
        A: await made('POST', `${path}/artifacts`, { name: 'a' }),
        K: await made('POST', `/work/missions/${f.missionId}/tasks`, { title: 'k' }),
        P: await made('POST', '/approvals', { domain_id: f.domainId, title: 'p' }),
        S: 'agree-secret',
      };
      towers.push({ kind, t, slots, nodeJwt: f.node.jwt });
    }
  });
  afterAll(async () => {
    for (const { t } of towers) await t.close();
  });

  it.each<[string, string, unknown, string]>([
    ['POST', '/domains', { name: 'a\u0000b' }, 'body/name'],
    ['GET', '/domains/a%00b', undefined, 'params/domain_id'],
    ['GET', '/domains/{D}/m/a%00b', undefined, 'params/mission_id'],
    ['GET', '/domains?cursor=a%00b', undefined, 'query/cursor'],
    ['POST', '/domains/{D}/m/{M}/artifacts', { name: 'a', size_bytes: 1e308 }, 'body/size_bytes'],
    ['PATCH', '/domains/{D}/m/{M}/artifacts/{A}', { size_bytes: 2 ** 53 + 2 }, 'body/size_bytes'],
    ['POST', '/secrets/{S}/rollback?domain_id={D}', { version: 1e308 }, 'body/version'],
    [
      'POST',
      '/mcp/call',
      { tool: 'submit_mesh_task', args: { mission_id: '{M}', title: 'a\u0000' } },
      'args/title',
    ],
  ])(
    'refuses %s %s with 400 validation_failed naming %s on both stores',
    async (method, url, b, fieldName) => {
      for (const { t, slots } of towers) {
        const filled = fill({ method, path: [], body: b as Record<string, unknown> }, slots);
        const path = url.replace(/\{([A-Z])\}/g, (m, k: string) => slots[k] ?? m);
        const res = await t.call(method, path, filled.body);
        expect(res.status).toBe(400);
        expect(res.body.code).toBe('validation_failed');
        expect(JSON.stringify(res.body)).toContain(fieldName);
      }
    },
  );

  it('gives the same status on SQLite and PostgreSQL to any sequence of requests, never a 5xx', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(REQUESTS, { minLength: 1, maxLength: 6 }), async (requests) => {
        for (const r of requests) {
          const statuses: number[] = [];
          const answers: unknown[] = [];
          for (const { t, slots, nodeJwt } of towers) {
            const { url, body: b } = fill(r, slots);
            const res = await t.tower.app.inject({
              method: r.method as 'GET',
              url,
              headers: {
                authorization: `Bearer ${r.as === 'node' ? nodeJwt : t.adminToken}`,
                ...(b !== undefined ? { 'content-type': 'application/json' } : {}),
              },
              ...(b !== undefined ? { payload: JSON.stringify(b) } : {}),
            });
            statuses.push(res.statusCode);
            answers.push(res.body.slice(0, 300));
          }
          const [sqlite, postgres] = statuses as [number, number];
          if (sqlite !== postgres || sqlite >= 500) {
            throw new Error(
              `${r.method} ${fill(r, towers[0]?.slots ?? {}).url}: SQLite ${sqlite}, PostgreSQL ${postgres}\n${JSON.stringify(r.body)}\n${JSON.stringify(answers)}`,
            );
          }
        }
      }),
      { numRuns: 150, seed: 28 },
    );
    expect(towers.length).toBe(2);
  });
});
