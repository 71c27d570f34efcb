// The tower as a real process: starts from the CLI, serves, shuts down gracefully, and
// shares one PostgreSQL database between replicas without lost or doubled writes.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import pg from 'pg';
import { afterEach, describe, expect, it } from 'vitest';
import { MIGRATIONS } from '../../src/tower/migrations.js';
import { createTestSchema, type TestSchema } from '../support/pg.js';
import { run, SVC_BIN, startTowerProc, stopAll } from '../support/procs.js';
import { makeTempDir } from '../support/tmp.js';

const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  await stopAll();
  for (const c of cleanups.splice(0).reverse()) await c();
});

function home() {
  const tmp = makeTempDir('svc-e2e-');
  cleanups.push(() => tmp.remove());
  return tmp.dir;
}

async function schema(): Promise<TestSchema> {
  const s = await createTestSchema();
  cleanups.push(() => s.drop());
  return s;
}

async function api(url: string, token: string, method: string, path: string, body?: unknown) {
  const res = await fetch(url + path, {
    method,
    headers: { authorization: `Bearer ${token}`, ...(body ? { 'content-type': 'application/json' } : {}) },
    ...(body ? { body: JSON.stringify(body) } : {}),
  });
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
}

describe('svc tower serve', () => {
  it('starts on SQLite, answers health, readiness and metrics, and the CLI works against it', async () => {
    const h = home();
    const env = { SVC_HOME: h };
    const tower = await startTowerProc(env);
    expect(await (await fetch(`${tower.url}/healthz`)).json()).toEqual({ status: 'ok' });
    expect(await (await fetch(`${tower.url}/readyz`)).json()).toEqual({ status: 'ready' });
    const admin = readFileSync(join(h, 'tower', 'admin.token'), 'utf8').trim();
    expect(admin).toMatch(/^svc_/);

    const created = await run(SVC_BIN, ['--url', tower.url, '--json', 'domain', 'create', 'e2e'], env);
    expect(created.code).toBe(0);
    const dom = JSON.parse(created.stdout) as { id: string; name: string };
    expect(dom.name).toBe('e2e');
    const listed = await run(SVC_BIN, ['--url', tower.url, 'domain', 'list'], env);
    expect(listed.stdout).toContain(dom.id);

    const metrics = await fetch(`${tower.url}/metrics`, { headers: { authorization: `Bearer ${admin}` } });
    const text = await metrics.text();
    expect(text).toContain(
      'svc_http_request_duration_seconds_count{method="POST",route="/domains",status="201"} 1',
    );
    expect((await fetch(`${tower.url}/metrics`)).status).toBe(401);
  });

  it('exits 0 on SIGTERM after finishing in-flight requests', async () => {
    const env = { SVC_HOME: home() };
    const tower = await startTowerProc(env);
    const admin = readFileSync(join(env.SVC_HOME, 'tower', 'admin.token'), 'utf8').trim();
    const inflight = api(tower.url, admin, 'POST', '/domains', { name: 'last' });
    tower.kill('SIGTERM');
    const [res, code] = await Promise.all([inflight.catch((e: Error) => e), tower.exited]);
    expect(code).toBe(0);
    // The request either completed before the listener closed, or was refused: connection
    // refused, or 503 from a tower already closing. Never half-done.
    if (!(res instanceof Error)) expect([201, 503]).toContain(res.status);
  });

  it('refuses bad flags with usage errors (exit 2) and an unreachable tower with exit 69', async () => {
    const env = { SVC_HOME: home() };
    const bad = await run(SVC_BIN, ['tower', 'serve', '--listen', 'nonsense'], env);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain('invalid --listen "nonsense"');
    const down = await run(
      SVC_BIN,
      ['--url', 'http://127.0.0.1:1', '--token', 'svc_x', 'domain', 'list'],
      env,
    );
    expect(down.code).toBe(69);
    expect(down.stderr).toContain('cannot reach the tower');
    const insecure = await run(
      SVC_BIN,
      ['--url', 'http://tower.example.com', '--token', 'svc_x', 'domain', 'list'],
      env,
    );
    expect(insecure.code).toBe(78);
    expect(insecure.stderr).toContain('SVC_ALLOW_INSECURE=1');
  });

  it('two replicas starting together on one PostgreSQL schema migrate once and share one admin token', async () => {
    const s = await schema();
    const h1 = home();
    const h2 = home();
    const [a, b] = await Promise.all([
      startTowerProc({ SVC_HOME: h1 }, ['--database', s.url]),
      startTowerProc({ SVC_HOME: h2 }, ['--database', s.url]),
    ]);
    const client = new pg.Client({ connectionString: s.url.replace(/\?schema=.*/, '') });
    await client.connect();
    try {
      const migrations = await client.query(
        `select version from "${s.schema}".svc_migrations order by version`,
      );
      const tokens = await client.query(`select count(*)::int as n from "${s.schema}".tokens`);
      expect(migrations.rows.map((r: { version: number }) => r.version)).toEqual(
        MIGRATIONS.map((m) => m.version).sort((x, y) => x - y),
      );
      expect(tokens.rows[0].n).toBe(1);
    } finally {
      await client.end();
    }
    let files = 0;
    for (const h of [h1, h2]) {
      try {
        readFileSync(join(h, 'tower', 'admin.token'));
        files++;
      } catch {
        // the other replica created it
      }
    }
    expect(files).toBe(1);
    expect((await fetch(`${a.url}/readyz`)).status).toBe(200);
    expect((await fetch(`${b.url}/readyz`)).status).toBe(200);
  });

  it('loses and doubles no rows with 50 concurrent writers across 2 PostgreSQL replicas', async () => {
    const s = await schema();
    const h1 = home();
    const a = await startTowerProc({ SVC_HOME: h1 }, ['--database', s.url, '--rate-limit', '0']);
    const b = await startTowerProc({ SVC_HOME: home() }, ['--database', s.url, '--rate-limit', '0']);
    const admin = readFileSync(join(h1, 'tower', 'admin.token'), 'utf8').trim();
    const dom = await api(a.url, admin, 'POST', '/domains', { name: 'concurrency' });
    const mis = await api(a.url, admin, 'POST', `/domains/${dom.body.id}/m`, { name: 'm' });
    const base = `/domains/${dom.body.id}/m/${mis.body.id}/t`;
    const writers = 50;
    const perWriter = 10;
    await Promise.all(
      Array.from({ length: writers }, async (_, w) => {
        for (let i = 0; i < perWriter; i++) {
          const url = (w + i) % 2 === 0 ? a.url : b.url;
          const res = await api(url, admin, 'POST', base, { title: `w${w}-${i}` });
          expect(res.status).toBe(201);
        }
      }),
    );
    const titles: string[] = [];
    let cursor: string | null = null;
    do {
      const page = await api(a.url, admin, 'GET', `${base}?limit=500${cursor ? `&cursor=${cursor}` : ''}`);
      titles.push(...(page.body.items as { title: string }[]).map((t) => t.title));
      cursor = page.body.next_cursor as string | null;
    } while (cursor);
    const expected = Array.from({ length: writers }, (_, w) =>
      Array.from({ length: perWriter }, (_, i) => `w${w}-${i}`),
    ).flat();
    expect(titles.sort()).toEqual(expected.sort());
    const events = await new pg.Client({ connectionString: s.url.replace(/\?schema=.*/, '') });
    await events.connect();
    try {
      const r = await events.query(
        `select count(*)::int as n, count(distinct id)::int as d from "${s.schema}".events where mission_id = $1`,
        [mis.body.id],
      );
      // one event for the mission's creation + one per task
      expect(r.rows[0]).toEqual({ n: writers * perWriter + 1, d: writers * perWriter + 1 });
    } finally {
      await events.end();
    }
  });
});
