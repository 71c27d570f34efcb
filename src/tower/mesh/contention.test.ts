// Exactly-once under contention: two tower replicas on one PostgreSQL schema, 16 concurrent
// claimers split between them, every task completed exactly once and none left behind.
// SVC_MESH_CONTENTION_TASKS scales it: the suite runs 160, `npm run test:contention` the
// issue's 10 000 (docs/mesh.md).
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loggedEvents } from '../../../test/support/events.js';
import { createTestSchema, type TestSchema } from '../../../test/support/pg.js';
import { makeTempDir } from '../../../test/support/tmp.js';
import { silentLogger } from '../../lib/log.js';
import type { Principal } from '../auth/principal.js';
import { createTower, type Tower } from '../tower.js';

const TASKS = Number(process.env.SVC_MESH_CONTENTION_TASKS ?? 160);
const CLAIMERS = 16;
const ADMIN: Principal = {
  kind: 'token',
  id: 'test',
  name: 'test',
  scopes: ['admin'],
  domains: null,
  expiresAt: null,
};

describe('mesh claims across two replicas on PostgreSQL', () => {
  let schema: TestSchema;
  const dirs: ReturnType<typeof makeTempDir>[] = [];
  const towers: Tower[] = [];

  beforeAll(async () => {
    schema = await createTestSchema();
    for (let i = 0; i < 2; i++) {
      const d = makeTempDir();
      dirs.push(d);
      // One after the other: the first runs the migrations, the second finds them done.
      towers.push(await createTower({ dataDir: d.dir, database: schema.url, log: silentLogger() }));
    }
  });
  afterAll(async () => {
    for (const t of towers) await t.stop();
    await schema?.drop();
    for (const d of dirs) d.remove();
  });

  it(`completes each of ${TASKS} tasks exactly once with ${CLAIMERS} claimers`, async () => {
    const [a, b] = towers as [Tower, Tower];
    const admin = readFileSync(join(dirs[0]?.dir ?? '', 'admin.token'), 'utf8').trim();
    const call = async (method: 'POST', url: string, body: unknown, token = admin) => {
      const r = await a.app.inject({
        method,
        url,
        headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
        payload: JSON.stringify(body),
      });
      return JSON.parse(r.body) as { id: string; jwt: string };
    };
    const domain = await call('POST', '/domains', { name: 'contention' });
    const mission = await call('POST', `/domains/${domain.id}/m`, { name: 'm' });
    const node = await call('POST', '/nodes', { hostname: 'n1' });
    const agents: string[] = [];
    for (let i = 0; i < CLAIMERS; i++) {
      agents.push(
        (await call('POST', '/agents', { domain_id: domain.id, runtime: 'beta_cli' }, node.jwt)).id,
      );
    }
    const [meshA, meshB] = [a.mesh, b.mesh];
    for (let i = 0; i < TASKS; i += 100) {
      await Promise.all(
        Array.from({ length: Math.min(100, TASKS - i) }, (_, j) =>
          meshA.create(ADMIN, mission.id, { title: `t${i + j}`, priority: (i + j) % 3 }),
        ),
      );
    }

    const completed: string[] = [];
    await Promise.all(
      agents.map(async (agentId, i) => {
        const mesh = i % 2 === 0 ? meshA : meshB;
        for (;;) {
          const c = await mesh.claim(ADMIN, agentId, mission.id);
          if (!c) return;
          await mesh.complete(ADMIN, c.task.id, c.lease_id, { by: agentId });
          completed.push(c.task.id);
        }
      }),
    );

    expect(completed.length).toBe(TASKS);
    expect(new Set(completed).size).toBe(TASKS);
    const db = a.store.db;
    const states = await db
      .selectFrom('mesh_tasks')
      .select(['state', (eb) => eb.fn.countAll<string>().as('n')])
      .groupBy('state')
      .execute();
    expect(states.map((s) => [s.state, Number(s.n)])).toEqual([['completed', TASKS]]);
    // One "completed" transition event per task, written with the change.
    const events = (await loggedEvents(db)).filter((e) => e.type === 'matrix' && e.status === 'completed');
    const ids = events
      .map((e) => JSON.parse(e.payload) as { entity?: string; id?: string })
      .filter((p) => p.entity === 'mesh_task')
      .map((p) => p.id);
    expect(ids.length).toBe(TASKS);
    expect(new Set(ids).size).toBe(TASKS);
  }, 300_000);
});
