// An in-process tower for route tests (app.inject, no port) on either store.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Clock } from '../../src/lib/clock.js';
import { silentLogger } from '../../src/lib/log.js';
import { Signal } from '../../src/lib/signal.js';
import { createSequencer } from '../../src/tower/feed/sequencer.js';
import { createTower, type Tower, type TowerOptions } from '../../src/tower/tower.js';
import { createTestSchema } from './pg.js';
import { makeTempDir } from './tmp.js';

export type StoreKind = 'sqlite' | 'postgres';
export const STORES: StoreKind[] = ['sqlite', 'postgres'];

export interface TestTower {
  tower: Tower;
  adminToken: string;
  dataDir: string;
  databaseUrl?: string;
  /** app.inject with the admin token unless `token` is given (null: no header). */
  call(
    method: string,
    url: string,
    body?: unknown,
    token?: string | null,
  ): Promise<{ status: number; body: Record<string, unknown>; headers: Record<string, unknown> }>;
  close(): Promise<void>;
}

export async function startTestTower(
  kind: StoreKind,
  opts: Partial<Omit<TowerOptions, 'dataDir' | 'database' | 'log'>> & { clock?: Clock } = {},
): Promise<TestTower> {
  const tmp = makeTempDir();
  const schema = kind === 'postgres' ? await createTestSchema() : null;
  const tower = await createTower({
    ...opts,
    dataDir: tmp.dir,
    database: schema?.url,
    log: silentLogger(),
  });
  const adminToken = readFileSync(join(tmp.dir, 'admin.token'), 'utf8').trim();
  return {
    tower,
    adminToken,
    dataDir: tmp.dir,
    ...(schema ? { databaseUrl: schema.url } : {}),
    async call(method, url, body, token) {
      const t = token === undefined ? adminToken : token;
      const res = await tower.app.inject({
        method: method as 'GET',
        url,
        headers: {
          ...(t ? { authorization: `Bearer ${t}` } : {}),
          ...(body !== undefined ? { 'content-type': 'application/json' } : {}),
        },
        ...(body !== undefined ? { payload: typeof body === 'string' ? body : JSON.stringify(body) } : {}),
      });
      const text = res.body;
      return {
        status: res.statusCode,
        body: text ? (JSON.parse(text) as Record<string, unknown>) : {},
        headers: res.headers as Record<string, unknown>,
      };
    },
    async close() {
      await tower.stop();
      await schema?.drop();
      tmp.remove();
    },
  };
}

/**
 * PostgreSQL: runs one sequencer pass of its own on the tower's store, starting now (stop
 * waits for the pass under way), to see where it leaves the feed's watermark.
 */
export async function sequencerPass(t: TestTower): Promise<void> {
  const { store, clock, log } = t.tower;
  const probe = createSequencer({
    store,
    clock,
    log,
    sequenced: new Signal(),
  });
  await probe.start();
  await probe.stop();
}

/** What a mesh test claims with: a node, a domain with a mission, and one agent enrolled. */
export interface MeshFixture {
  node: { id: string; jwt: string };
  domainId: string;
  missionId: string;
  agentId: string;
}

/** Registers a node `name`, creates domain and mission `name`, and enrols one agent. */
export async function meshFixture(t: TestTower, name: string): Promise<MeshFixture> {
  const node = (await t.call('POST', '/nodes', { hostname: name })).body as MeshFixture['node'];
  const domainId = ((await t.call('POST', '/domains', { name })).body as { id: string }).id;
  const missionId = ((await t.call('POST', `/domains/${domainId}/m`, { name })).body as { id: string }).id;
  const agent = await t.call('POST', '/agents', { domain_id: domainId, runtime: 'beta_cli' }, node.jwt);
  if (agent.status !== 201)
    throw new Error(`enrolling an agent: ${agent.status} ${JSON.stringify(agent.body)}`);
  return { node, domainId, missionId, agentId: (agent.body as { id: string }).id };
}
