// N tower replicas (real `svc tower serve` processes from dist/) on one PostgreSQL schema,
// behind a real HAProxy (./haproxy.ts). Each replica has its own data dir; they share the
// schema and one master key, as a deployment's replicas do. stop() kills the replicas and
// HAProxy and drops the schema.
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { type Haproxy, startHaproxy } from './haproxy.js';
import { createTestSchema, type TestSchema } from './pg.js';
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
  stop(): Promise<void>;
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
    return { schema, towers, homes, lb, admin, masterKey, dir: tmp.dir, stop };
  } catch (e) {
    await stop();
    throw e;
  }
}
