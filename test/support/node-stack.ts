// The startup most e2e files share, as real processes: a tower (`svc tower serve`, SQLite in
// the node's SVC_HOME), a node registered with it, and the node's svcd, started once its files
// are written and waited for until it runs and its control channel to the tower is up. stop()
// kills every process procs.ts started and removes the temp dir.
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { mgmtCall } from '../../src/cli/mgmt-client.js';
import { waitFor } from './poll.js';
import {
  isolatedEnv,
  type Proc,
  run,
  SVC_BIN,
  SVCD_BIN,
  spawnProc,
  startTowerProc,
  stopAll,
  type TowerProc,
} from './procs.js';
import { makeTempDir } from './tmp.js';

export interface NodeStackOptions {
  /** Names the temp dir and, unless `hostname` is given, the node. */
  name: string;
  hostname?: string;
  /** Extra `svc tower serve` arguments. */
  towerArgs?: string[];
  /** Files written to $SVC_HOME/svcd/ before svcd starts, by name (config.toml, agents.toml, …). */
  svcdFiles?: Record<string, string>;
  /** Runs after the node is registered and before svcd starts (create domains, enrol agents, write files). */
  beforeSvcd?(stack: NodeStack): Promise<void>;
  /** `svcd run` arguments after --backend-url and environment additions; false: do not start svcd. */
  svcd?: false | { args?: string[]; env?: NodeJS.ProcessEnv };
}

export interface NodeStack {
  tmp: { dir: string; remove(): void };
  /** The node's environment (isolatedEnv): SVC_HOME, HOME, SVC_NODE_FILE under tmp.dir. */
  env: NodeJS.ProcessEnv;
  /** $SVC_HOME */
  home: string;
  /** `env` with SVC_BASE_URL set to the tower: for svc commands. */
  cli: NodeJS.ProcessEnv;
  tower: TowerProc;
  adminToken: string;
  node: { node_id: string; jwt: string };
  mgmtSock: string;
  /** The running svcd (null with `svcd: false`, until startSvcd()). */
  svcd: Proc | null;
  /** Runs svc with `cli`; returns stdout, throws with stderr on a non-zero exit. */
  svc(args: string[], input?: string): Promise<string>;
  /** The tower's HTTP API with the admin token. */
  admin(method: string, path: string, body?: unknown): Promise<Response>;
  /** Enrols an agent of this node (POST /agents with the node JWT); returns its id. */
  enrol(domainId: string, name: string, runtime?: string): Promise<string>;
  /** Creates a domain and a mission in it (svc domain/mission create); returns their ids. */
  mission(domain: string, mission: string): Promise<{ domainId: string; missionId: string }>;
  /** Starts svcd and waits until every component has started and its control channel is up. */
  startSvcd(args?: string[], env?: NodeJS.ProcessEnv): Promise<Proc>;
  stop(): Promise<void>;
}

/** Waits until svcd `p` has started every component and its control channel is up. */
export async function svcdConnected(p: Proc, mgmtSock: string, what: string): Promise<void> {
  await waitFor(
    what,
    async () => {
      if (p.child.exitCode !== null) throw new Error(`svcd exited (${p.child.exitCode}): ${p.stderr()}`);
      // "svcd running" comes once every component has started.
      if (!/svcd running/.test(p.stdout())) return false;
      const status = await mgmtCall<{ tower: { connected: boolean } }>(mgmtSock, 'daemon.status');
      return status.tower.connected;
    },
    { timeoutMs: 90_000 },
  );
}

export async function startNodeStack(opts: NodeStackOptions): Promise<NodeStack> {
  const tmp = makeTempDir(`svc-e2e-${opts.name}-`);
  const env = isolatedEnv(tmp.dir);
  const home = env.SVC_HOME as string;
  for (const d of [home, env.HOME as string, join(home, 'svcd')])
    mkdirSync(d, { recursive: true, mode: 0o700 });
  const tower = await startTowerProc(env, opts.towerArgs);
  const cli = { ...env, SVC_BASE_URL: tower.url };
  const adminToken = readFileSync(join(home, 'tower', 'admin.token'), 'utf8').trim();
  const mgmtSock = join(home, 'svcd', 'mgmt.sock');

  const stack: NodeStack = {
    tmp,
    env,
    home,
    cli,
    tower,
    adminToken,
    node: { node_id: '', jwt: '' },
    mgmtSock,
    svcd: null,
    async svc(args, input) {
      const r = await run(SVC_BIN, args, cli, input);
      if (r.code !== 0) throw new Error(`svc ${args.join(' ')} failed (${r.code}): ${r.stderr}`);
      return r.stdout;
    },
    admin(method, path, body) {
      return fetch(tower.url + path, {
        method,
        headers: {
          authorization: `Bearer ${adminToken}`,
          ...(body !== undefined ? { 'content-type': 'application/json' } : {}),
        },
        ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
      });
    },
    async enrol(domainId, name, runtime = 'alpha_code') {
      const res = await fetch(`${tower.url}/agents`, {
        method: 'POST',
        headers: { authorization: `Bearer ${stack.node.jwt}`, 'content-type': 'application/json' },
        body: JSON.stringify({ domain_id: domainId, runtime, name }),
      });
      if (res.status !== 201) throw new Error(`POST /agents answered ${res.status}: ${await res.text()}`);
      return ((await res.json()) as { id: string }).id;
    },
    async mission(domain, mission) {
      const created = async (args: string[]) =>
        (JSON.parse(await stack.svc(['--json', ...args])) as { id: string }).id;
      const domainId = await created(['domain', 'create', domain]);
      return { domainId, missionId: await created(['mission', 'create', mission, '--domain', domainId]) };
    },
    async startSvcd(args = [], extraEnv = {}) {
      const p = spawnProc(SVCD_BIN, ['run', '--backend-url', tower.url, ...args], { ...env, ...extraEnv });
      await svcdConnected(p, mgmtSock, 'svcd connected to the tower');
      stack.svcd = p;
      return p;
    },
    async stop() {
      await stopAll();
      tmp.remove();
    },
  };

  try {
    await stack.svc(['agent', 'node', 'register', '--hostname', opts.hostname ?? `${opts.name}-node`]);
    const identity = JSON.parse(readFileSync(env.SVC_NODE_FILE as string, 'utf8')) as {
      node_id: string;
      jwt: string;
    };
    stack.node = { node_id: identity.node_id, jwt: identity.jwt };
    for (const [file, text] of Object.entries(opts.svcdFiles ?? {}))
      writeFileSync(join(home, 'svcd', file), text);
    await opts.beforeSvcd?.(stack);
    if (opts.svcd !== false) await stack.startSvcd(opts.svcd?.args, opts.svcd?.env);
  } catch (e) {
    await stack.stop();
    throw e;
  }
  return stack;
}
