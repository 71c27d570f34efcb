// Gathers DoctorFacts: stats of SVC_HOME, SVC_SKILLS_HOME, the identity file and svcd's
// sockets, PATH look-ups, one /healthz and two authenticated GETs to the tower, and
// daemon.status / fanout.status over mgmt.sock. Every probe has a deadline and never throws.
import { execFile } from 'node:child_process';
import { accessSync, constants, statSync } from 'node:fs';
import { delimiter, join } from 'node:path';
import { nodeFile, readNodeIdentity } from '../../daemon/identity.js';
import { daemonPaths } from '../../daemon/paths.js';
import type { Clock } from '../../lib/clock.js';
import { requestJson } from '../../lib/http.js';
import { checkBaseUrl } from '../../lib/url.js';
import type { NodeIdentity } from '../../protocol/nodes.js';
import type { CliIO } from '../io.js';
import { resolveCredentials } from '../login-store.js';
import { MgmtClient } from '../mgmt-client.js';
import { hasUserBus } from '../user-unit.js';
import type { DoctorFacts, HttpProbe, PathFact, ToolFact } from './facts.js';
import { agentIdFile, readAgentId, skillsHome } from './homes.js';

/** No single probe may hold the doctor longer than this. */
const PROBE_TIMEOUT_MS = 5_000;
export const REQUIRED_TOOLS = ['bash', 'git', 'tmux'] as const;

export function pathFact(path: string): PathFact {
  let st: ReturnType<typeof statSync>;
  try {
    st = statSync(path);
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    if (code === 'ENOENT' || code === 'ENOTDIR') {
      return { path, kind: 'missing', mode: null, uid: null, writable: false, error: null };
    }
    return { path, kind: 'other', mode: null, uid: null, writable: false, error: code ?? String(e) };
  }
  const kind = st.isDirectory() ? 'dir' : st.isFile() ? 'file' : st.isSocket() ? 'socket' : 'other';
  let writable = true;
  try {
    accessSync(path, st.isDirectory() ? constants.W_OK | constants.X_OK : constants.W_OK);
  } catch {
    writable = false;
  }
  return { path, kind, mode: Number(st.mode) & 0o7777, uid: Number(st.uid), writable, error: null };
}

/** The first executable regular file called `name` on PATH (what execvp would run). */
export function which(name: string, pathVar: string | undefined): string | null {
  for (const dir of (pathVar ?? '').split(delimiter)) {
    if (!dir) continue;
    const p = join(dir, name);
    try {
      if (!statSync(p).isFile()) continue;
      accessSync(p, constants.X_OK);
      return p;
    } catch {
      // not here
    }
  }
  return null;
}

async function get(url: string, token: string | null): Promise<HttpProbe> {
  try {
    const r = await requestJson(url, 'GET', { token, signal: AbortSignal.timeout(PROBE_TIMEOUT_MS) });
    return { ok: true, status: r.status, body: r.text };
  } catch (e) {
    const err = e as Error & { causeCode?: string };
    if (err.name === 'TimeoutError')
      return { ok: false, error: `no answer within ${PROBE_TIMEOUT_MS / 1000} s` };
    return { ok: false, error: err.causeCode ?? err.message };
  }
}

function withDeadline<T>(p: Promise<T>, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const t = new Promise<never>((_, reject) => {
    timer = setTimeout(
      () => reject(new Error(`${what}: no answer within ${PROBE_TIMEOUT_MS / 1000} s`)),
      PROBE_TIMEOUT_MS,
    );
  });
  return Promise.race([p, t]).finally(() => clearTimeout(timer));
}

/** daemon.status, then fanout.status (a svcd without it says "method not found"). */
async function askDaemon(sock: string): Promise<Pick<DoctorFacts, 'daemon' | 'fanout'>> {
  let client: MgmtClient;
  try {
    client = await withDeadline(MgmtClient.connect(sock), 'mgmt.sock');
  } catch (e) {
    // MgmtClient's message says "svcd is not running (cannot connect to …)"; keep the cause.
    const msg = (e as Error).message;
    const cause = /\((cannot connect to [^)]*)\)/.exec(msg)?.[1] ?? msg;
    return {
      daemon: { status: null, error: cause },
      fanout: { source: null, reason: 'svcd is not running' },
    };
  }
  try {
    const status = await withDeadline(client.call<Record<string, unknown>>('daemon.status'), 'daemon.status');
    let fanout: DoctorFacts['fanout'];
    try {
      const f = await withDeadline(client.call<Record<string, unknown>>('fanout.status'), 'fanout.status');
      fanout = { source: 'fanout.status', status: f };
    } catch (e) {
      const comp = (status.components as Record<string, unknown> | undefined)?.fanout;
      fanout =
        typeof comp === 'object' && comp !== null
          ? { source: 'daemon.status', status: comp as Record<string, unknown> }
          : { source: null, reason: `svcd reports no fan-out status (${(e as Error).message})` };
    }
    return { daemon: { status, error: null }, fanout };
  } catch (e) {
    return {
      daemon: { status: null, error: (e as Error).message },
      fanout: { source: null, reason: 'svcd did not answer' },
    };
  } finally {
    client.close();
  }
}

function systemctlUser(path: string, env: NodeJS.ProcessEnv): Promise<{ code: number; out: string }> {
  return new Promise((res) => {
    execFile(
      path,
      ['--user', 'is-system-running'],
      { env, timeout: PROBE_TIMEOUT_MS },
      (err, stdout, stderr) => {
        const code = err ? (typeof err.code === 'number' ? err.code : 1) : 0;
        res({ code, out: `${stdout}`.trim() || `${stderr}`.trim() });
      },
    );
  });
}

export interface ProbeOptions {
  /** Global --url / --token of svc. */
  url?: string;
  token?: string;
}

export async function gatherFacts(io: CliIO, clock: Clock, opts: ProbeOptions): Promise<DoctorFacts> {
  const env = io.env;
  const home = io.paths.home;
  const paths = daemonPaths(home);
  const skills = skillsHome(env, home);

  const { daemon, fanout } = await askDaemon(paths.mgmtSock);
  // The file the running svcd read (svc up starts it with its own SVC_NODE_FILE), else the one
  // svcd would read here.
  const daemonFile = typeof daemon.status?.node_file === 'string' ? daemon.status.node_file : null;
  const chosen = daemonFile
    ? { file: daemonFile, why: 'the running svcd uses it' }
    : nodeFile(env, home, 'read');
  const idFile = chosen.file;
  let identity: NodeIdentity | null = null;
  let idError: string | null = null;
  try {
    // Its mode is a check of its own (checks.ts): read it whatever the mode.
    identity = await readNodeIdentity(idFile, { shared: 'report' });
  } catch (e) {
    // The hint says what to run; the detail keeps only what is wrong.
    idError = (e as Error).message.replace(/: run "svc agent node register.*$/, '');
  }

  let opUrl: string | null = null;
  let opToken: string | null = null;
  let opError: string | null = null;
  try {
    const c = await resolveCredentials(io, {
      ...(opts.url ? { url: opts.url } : {}),
      ...(opts.token ? { token: opts.token } : {}),
    });
    opUrl = c.url;
    opToken = c.token;
  } catch (e) {
    opError = (e as Error).message;
  }

  const daemonUrl = typeof daemon.status?.backend_url === 'string' ? daemon.status.backend_url : null;
  const tower: { url: string; source: DoctorFacts['tower']['source'] } = daemonUrl
    ? { url: daemonUrl, source: 'daemon' }
    : identity
      ? { url: identity.backend_url, source: 'identity' }
      : { url: opUrl ?? env.SVC_BASE_URL ?? 'http://127.0.0.1:8008', source: 'operator' };
  let base: string | null = null;
  let health: HttpProbe;
  try {
    base = checkBaseUrl(tower.url, env.SVC_ALLOW_INSECURE === '1');
    health = await get(`${base}/healthz`, null);
  } catch (e) {
    health = { ok: false, error: (e as Error).message };
  }
  const towerUp = health.ok && health.status === 200;
  const nodeAuth =
    identity && base && towerUp
      ? await get(`${base}/nodes/${encodeURIComponent(identity.node_id)}`, identity.jwt)
      : null;
  const opProbe = opUrl && opToken ? await get(`${opUrl}/nodes`, opToken) : null;

  const tools: ToolFact[] = REQUIRED_TOOLS.map((name) => ({ name, path: which(name, env.PATH) }));
  const systemctlPath = which('systemctl', env.PATH);
  const userBus = hasUserBus(env);

  const agentFile = agentIdFile(home);
  const agent = await readAgentId(agentFile);

  return {
    now: clock.now(),
    uid: process.getuid?.() ?? -1,
    home: pathFact(home),
    skillsHome: { ...pathFact(skills.path), fromEnv: skills.fromEnv },
    agentId: { file: agentFile, ...agent },
    identity: { file: idFile, why: chosen.why, fact: pathFact(idFile), identity, error: idError },
    tower: { ...tower, health },
    nodeAuth,
    operator: { url: opUrl, hasToken: Boolean(opToken), error: opError, probe: opProbe },
    daemon,
    svcdDir: pathFact(paths.svcdDir),
    sockets: [paths.mgmtSock, paths.secretsSock, paths.svcdSock].map(pathFact),
    tools,
    systemctl: {
      path: systemctlPath,
      userBus,
      result: systemctlPath && userBus ? await systemctlUser(systemctlPath, env) : null,
    },
    fanout,
  };
}
