// Every admin and token route × every kind of credential answers as docs/api.md's table "Who
// may call the admin and token routes" says: the table is read from the docs, so the two cannot
// drift apart. Each cell is one request with fixtures of its own (a fresh token to revoke, an
// older signing key to retire, an empty domain to delete), against an in-process tower.
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestTower, type TestTower } from '../../../test/support/tower.js';

const DOC = resolve(import.meta.dirname, '../../../docs/api.md');
const KINDS = ['admin', 'admin of D1', 'work:write', 'feed:read', 'node', 'none'] as const;
type Kind = (typeof KINDS)[number];

interface Row {
  method: string;
  path: string;
  body: string | undefined;
  expected: Record<Kind, number>;
}

function readMatrix(): Row[] {
  const text = readFileSync(DOC, 'utf8');
  const start = text.indexOf('<!-- access-matrix:start -->');
  const end = text.indexOf('<!-- access-matrix:end -->');
  if (start < 0 || end < 0) throw new Error('docs/api.md has no access matrix');
  const lines = text
    .slice(start, end)
    .split('\n')
    .filter((l) => l.startsWith('| `'));
  return lines.map((line) => {
    const cells = line.split(' | ').map((c) =>
      c
        .replace(/^\|\s*/, '')
        .replace(/\s*\|$/, '')
        .trim(),
    );
    const request = /^`([A-Z]+) ((?:\{[^}]*\}|[^\s{])+)(?: (.*))?`$/.exec(cells[0] ?? '');
    if (!request) throw new Error(`cannot read the request of: ${line}`);
    const expected = {} as Record<Kind, number>;
    KINDS.forEach((k, i) => {
      expected[k] = Number(/\d{3}/.exec(cells[i + 1] ?? '')?.[0]);
    });
    return { method: request[1] as string, path: request[2] as string, body: request[3], expected };
  });
}

describe('who may call the admin and token routes (docs/api.md)', () => {
  let t: TestTower;
  const creds = {} as Record<Kind, string | null>;
  let d1 = '';
  let d2 = '';
  let n = 0;

  beforeAll(async () => {
    t = await startTestTower('sqlite');
    const made = async (method: string, url: string, body: unknown) => {
      const r = await t.call(method, url, body);
      if (r.status >= 300) throw new Error(`${method} ${url}: ${r.status} ${JSON.stringify(r.body)}`);
      return r.body as Record<string, string>;
    };
    d1 = (await made('POST', '/domains', { name: 'D1' })).id as string;
    d2 = (await made('POST', '/domains', { name: 'D2' })).id as string;
    creds.admin = t.adminToken;
    creds['admin of D1'] = (await made('POST', '/tokens', { name: 'a1', scopes: ['admin'], domains: [d1] }))
      .token as string;
    creds['work:write'] = (await made('POST', '/tokens', { name: 'ww', scopes: ['work:write'] }))
      .token as string;
    creds['feed:read'] = (await made('POST', '/tokens', { name: 'fr', scopes: ['feed:read'] }))
      .token as string;
    creds.node = (await made('POST', '/nodes', { hostname: 'matrix-node' })).jwt as string;
    creds.none = null;
    await made('PUT', `/secrets/S1?domain_id=${d1}`, { value: 'v0' });
  });
  afterAll(async () => {
    await t?.close();
  });

  /** Replaces the placeholders of a request with fixtures made for this one cell. */
  async function fill(text: string): Promise<string> {
    const admin = async (method: string, url: string, body?: unknown) =>
      (await t.call(method, url, body)).body as Record<string, unknown>;
    let out = text.replaceAll('D1', d1).replaceAll('D2', d2);
    if (out.includes('{token of ' + d1 + '}')) {
      const tok = await admin('POST', '/tokens', { name: 'victim', scopes: ['feed:read'], domains: [d1] });
      out = out.replace(`{token of ${d1}}`, tok.id as string);
    }
    if (out.includes('{token of every domain}')) {
      const tok = await admin('POST', '/tokens', { name: 'victim', scopes: ['feed:read'] });
      out = out.replace('{token of every domain}', tok.id as string);
    }
    if (out.includes('{older key}')) {
      await admin('POST', '/admin/signing-keys/rotate');
      const keys = (await admin('GET', '/admin/signing-keys')).items as {
        kid: string;
        active: boolean;
        retired_at: string | null;
      }[];
      const older = keys.filter((k) => !k.active && k.retired_at === null).at(-1);
      out = out.replace('{older key}', older?.kid ?? 'none');
    }
    if (out.includes('{empty domain}')) {
      const d = await admin('POST', '/domains', { name: `empty ${n++}` });
      out = out.replace('{empty domain}', d.id as string);
    }
    if (out.includes('{new host}')) out = out.replace('{new host}', `host-${n++}`);
    if (out.includes('{node of every domain}')) {
      const host = `global-${n++}`;
      await admin('POST', '/nodes', { hostname: host });
      out = out.replace('{node of every domain}', host);
    }
    return out;
  }

  for (const row of readMatrix()) {
    const name = `${row.method} ${row.path}${row.body ? ` ${row.body}` : ''}`;
    it(`answers ${name} per credential as the table says`, async () => {
      const got = {} as Record<Kind, number>;
      for (const kind of KINDS) {
        const path = await fill(row.path);
        const body = row.body === undefined ? undefined : JSON.parse(await fill(row.body));
        const r = await t.call(row.method, path, body, creds[kind]);
        got[kind] = r.status;
      }
      expect(got).toEqual(row.expected);
    });
  }
});
