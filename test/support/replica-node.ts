// A node behind tower replicas, as real processes: two `svc tower serve` replicas on one
// PostgreSQL schema behind a real HAProxy (./replicas.ts), a node registered through the
// balancer, and its svcd connected through it. Which replica holds the node's control channel
// is read from the shared presence table, as a test asks "the other replica". stop() kills
// every process procs.ts started, HAProxy and the replicas, and drops the schema.
import { mkdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import pg from 'pg';
import { mgmtCall } from '../../src/cli/mgmt-client.js';
import { PG_BASE_URL } from './pg.js';
import { waitFor } from './poll.js';
import { isolatedEnv, type Proc, run, SVC_BIN, SVCD_BIN, spawnProc, stopAll } from './procs.js';
import { type Replicas, startReplicas } from './replicas.js';

export interface ReplicaNode {
  r: Replicas;
  /** The node's environment (isolatedEnv): SVC_HOME, HOME, SVC_NODE_FILE. */
  env: NodeJS.ProcessEnv;
  home: string;
  /** `env` with the balancer as SVC_BASE_URL and the admin token: for svc commands. */
  cli: NodeJS.ProcessEnv;
  mgmtSock: string;
  node: { node_id: string; jwt: string };
  svcd: Proc;
  /** The tower's HTTP API at `base` (a replica or the balancer) with the admin token. */
  api<T = Record<string, unknown>>(
    base: string,
    method: string,
    path: string,
    body?: unknown,
  ): Promise<{ status: number; body: T }>;
  /** Runs svc with `cli`; returns stdout, throws with stderr on a non-zero exit. */
  svc(args: string[]): Promise<string>;
  /** Enrols an agent of this node (POST /agents with the node JWT, through the balancer). */
  enrol(domainId: string, name: string, runtime?: string): Promise<string>;
  /** Rows of the node in the presence table: the replica id and its address. */
  channels(): Promise<{ replica_id: string; address: string }[]>;
  /** The index in r.towers of the replica holding the node's channel (null: none). */
  holderIndex(): Promise<number | null>;
  /** The presence id of replica `i` (from its row in tower_replicas). */
  replicaId(i: number): Promise<string>;
  stop(): Promise<void>;
}

export interface ReplicaNodeOptions {
  hostname: string;
  /** Runs after the node is registered and before svcd starts (enrol agents, write files). */
  beforeSvcd?(n: ReplicaNode): Promise<void>;
}

async function query<T extends pg.QueryResultRow>(text: string, values: unknown[]): Promise<T[]> {
  const c = new pg.Client({ connectionString: PG_BASE_URL });
  await c.connect();
  try {
    return (await c.query<T>(text, values)).rows;
  } finally {
    await c.end();
  }
}

export async function startReplicaNode(o: ReplicaNodeOptions): Promise<ReplicaNode> {
  const r = await startReplicas({ n: 2, args: ['--rate-limit', '0'], checkIntervalMs: 200 });
  const env = isolatedEnv(join(r.dir, 'node'));
  const home = env.SVC_HOME as string;
  for (const d of [home, env.HOME as string, join(home, 'svcd')])
    mkdirSync(d, { recursive: true, mode: 0o700 });
  const cli = { ...env, SVC_BASE_URL: r.lb.url, SVC_TOKEN: r.admin };
  const s = r.schema.schema;
  const n: ReplicaNode = {
    r,
    env,
    home,
    cli,
    mgmtSock: join(home, 'svcd', 'mgmt.sock'),
    node: { node_id: '', jwt: '' },
    svcd: null as unknown as Proc,
    async api<T>(base: string, method: string, path: string, body?: unknown) {
      const res = await fetch(base + path, {
        method,
        headers: {
          authorization: `Bearer ${r.admin}`,
          ...(body !== undefined ? { 'content-type': 'application/json' } : {}),
        },
        ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
      });
      const text = await res.text();
      return { status: res.status, body: (text ? JSON.parse(text) : {}) as T };
    },
    async svc(args) {
      const p = await run(SVC_BIN, args, cli);
      if (p.code !== 0) throw new Error(`svc ${args.join(' ')} failed (${p.code}): ${p.stderr}`);
      return p.stdout;
    },
    async enrol(domainId, name, runtime = 'alpha_code') {
      const res = await fetch(`${r.lb.url}/agents`, {
        method: 'POST',
        headers: { authorization: `Bearer ${n.node.jwt}`, 'content-type': 'application/json' },
        body: JSON.stringify({ domain_id: domainId, runtime, name }),
      });
      if (res.status !== 201) throw new Error(`POST /agents answered ${res.status}: ${await res.text()}`);
      return ((await res.json()) as { id: string }).id;
    },
    channels: () =>
      query<{ replica_id: string; address: string }>(
        `select c.replica_id, r.address from "${s}".node_channels c
           left join "${s}".tower_replicas r on r.id = c.replica_id where c.node_id = $1`,
        [n.node.node_id],
      ),
    async holderIndex() {
      const [row, ...more] = await n.channels();
      if (!row || more.length > 0) return null;
      const i = r.towers.findIndex((t) => t.url === row.address);
      return i >= 0 ? i : null;
    },
    async replicaId(i) {
      const url = r.towers[i]?.url;
      const rows = await query<{ id: string }>(`select id from "${s}".tower_replicas where address = $1`, [
        url,
      ]);
      if (rows.length !== 1) throw new Error(`replica ${i} (${url}): ${rows.length} presence rows`);
      return (rows[0] as { id: string }).id;
    },
    async stop() {
      await stopAll();
      await r.stop();
    },
  };
  try {
    await n.svc(['--json', 'agent', 'node', 'register', '--hostname', o.hostname]);
    n.node = JSON.parse(readFileSync(env.SVC_NODE_FILE as string, 'utf8')) as {
      node_id: string;
      jwt: string;
    };
    await o.beforeSvcd?.(n);
    const svcd = spawnProc(SVCD_BIN, ['run', '--backend-url', r.lb.url, '--log-level', 'warn'], env);
    await waitFor(
      'svcd connected through HAProxy',
      async () => {
        if (svcd.child.exitCode !== null) throw new Error(`svcd exited: ${svcd.stderr()}`);
        // "svcd running" comes once every component has started.
        if (!/svcd running/.test(svcd.stdout())) return false;
        return (await mgmtCall<{ tower: { connected: boolean } }>(n.mgmtSock, 'daemon.status')).tower
          .connected;
      },
      { timeoutMs: 90_000 },
    );
    n.svcd = svcd;
    await waitFor('presence of the node in the store', () => n.holderIndex().then((i) => i !== null));
  } catch (e) {
    await n.stop();
    throw e;
  }
  return n;
}
