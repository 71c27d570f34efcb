// N tower replicas (real `svc tower serve` processes from dist/) on one PostgreSQL schema,
// behind a real HAProxy (./haproxy.ts). Each replica has its own data dir; they share the
// schema and one master key, as a deployment's replicas do. stop() kills the replicas and
// HAProxy and drops the schema.
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import pg from 'pg';
import { type Haproxy, startHaproxy } from './haproxy.js';
import { createTestSchema, PG_BASE_URL, type TestSchema } from './pg.js';
import { startTowerProc, type TowerProc } from './procs.js';
import { makeTempDir } from './tmp.js';

export interface Replicas {
  schema: TestSchema;
  towers: TowerProc[];
  /** Each replica's SVC_HOME. */
  homes: string[];
  lb: Haproxy;
  /** The bootstrap admin token (written by the first replica). */
  admin: string;
  /** SVC_MASTER_KEY shared by the replicas. */
  masterKey: string;
  /** The test's temp dir (HAProxy's config lives here). */
  dir: string;
  /** The HTTP API at `base` (a replica or the balancer) with the admin token. */
  call(base: string, method: string, path: string, body?: unknown): Promise<ApiAnswer>;
  /** The index in `towers` of the replica holding the node's channel, from the shared presence
   * table (null: none holds it). */
  holderOf(nodeId: string): Promise<number | null>;
  stop(): Promise<void>;
}

export interface ApiAnswer {
  status: number;
  body: Record<string, unknown>;
}

export async function startReplicas(
  o: { n?: number; args?: string[]; env?: NodeJS.ProcessEnv; checkIntervalMs?: number } = {},
): Promise<Replicas> {
  const n = o.n ?? 2;
  const tmp = makeTempDir('svc-replicas-');
  const schema = await createTestSchema();
  const masterKey = randomBytes(32).toString('hex');
  const towers: TowerProc[] = [];
  const homes: string[] = [];
  let lb: Haproxy | null = null;
  const stop = async () => {
    await lb?.stop();
    for (const t of towers) t.kill('SIGKILL');
    await Promise.all(towers.map((t) => t.exited));
    await schema.drop();
    tmp.remove();
  };
  try {
    // One after the other: the first migrates the schema and writes the admin token.
    for (let i = 0; i < n; i++) {
      const home = join(tmp.dir, `r${i}`);
      homes.push(home);
      towers.push(
        await startTowerProc({ SVC_HOME: home, SVC_MASTER_KEY: masterKey, ...o.env }, [
          '--database',
          schema.url,
          ...(o.args ?? []),
        ]),
      );
    }
    const admin = readFileSync(join(homes[0] as string, 'tower', 'admin.token'), 'utf8').trim();
    lb = await startHaproxy({
      dir: tmp.dir,
      backends: towers.map((t) => t.url),
      ...(o.checkIntervalMs ? { checkIntervalMs: o.checkIntervalMs } : {}),
    });
    const call = async (base: string, method: string, path: string, body?: unknown): Promise<ApiAnswer> => {
      const res = await fetch(base + path, {
        method,
        headers: {
          authorization: `Bearer ${admin}`,
          ...(body !== undefined ? { 'content-type': 'application/json' } : {}),
        },
        ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
      });
      const text = await res.text();
      return { status: res.status, body: (text ? JSON.parse(text) : {}) as Record<string, unknown> };
    };
    const holderOf = async (nodeId: string) => {
      const c = new pg.Client({ connectionString: PG_BASE_URL });
      await c.connect();
      try {
        const q = await c.query<{ address: string }>(
          `select r.address from "${schema.schema}".node_channels c
             join "${schema.schema}".tower_replicas r on r.id = c.replica_id where c.node_id = $1`,
          [nodeId],
        );
        const i = towers.findIndex((t) => t.url === q.rows[0]?.address);
        return i >= 0 ? i : null;
      } finally {
        await c.end();
      }
    };
    return { schema, towers, homes, lb, admin, masterKey, dir: tmp.dir, call, holderOf, stop };
  } catch (e) {
    await stop();
    throw e;
  }
}
