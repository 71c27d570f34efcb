// `svc up` / `svc down`: the one-command local start. A tower (embedded SQLite in
// $SVC_HOME/tower) and svcd run in the background, the node is registered, and a demo agent of
// the reference ACP runtime is enrolled and supervised. Running `svc up` again reuses what runs;
// `svc down` stops both. What was started is recorded in $SVC_HOME/up.json.
import { spawn } from 'node:child_process';
import { existsSync, openSync, readFileSync } from 'node:fs';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { hostname as osHostname } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Command } from 'commander';
import { readNodeIdentity, writeNodeIdentity } from '../../daemon/identity.js';
import { daemonPaths } from '../../daemon/paths.js';
import { requestJson } from '../../lib/http.js';
import type { List } from '../../protocol/common.js';
import { errorFromProblem, SvcError } from '../../protocol/errors.js';
import type { Agent } from '../../protocol/mesh.js';
import type { NodeRegistered } from '../../protocol/nodes.js';
import type { Domain, Mission } from '../../protocol/records.js';
import { type CommandDeps, globals } from '../deps.js';
import { mgmtCall } from '../mgmt-client.js';
import { print } from '../output.js';
import { SVCD_NODE_FLAGS } from '../svcd-launch.js';

const SVC_BIN = fileURLToPath(new URL('../svc.js', import.meta.url));
const SVCD_BIN = fileURLToPath(new URL('../svcd.js', import.meta.url));
const DEMO_PROFILE = 'demo';

interface UpState {
  tower?: { pid: number; url: string };
  svcd?: { pid: number };
  node_file?: string;
  demo?: { domain_id: string; mission_id: string; agent_id: string };
}

function alive(pid: number | undefined): boolean {
  if (!pid) return false;
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

async function until<T>(
  what: string,
  ms: number,
  fn: () => Promise<T | null>,
  hint: () => string,
): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const v = await fn().catch(() => null);
    if (v !== null) return v;
    if (Date.now() > deadline)
      throw new SvcError('unavailable', `${what} did not come up within ${ms / 1000} s${hint()}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

function tail(file: string): string {
  try {
    const lines = readFileSync(file, 'utf8').trim().split('\n');
    return `\nlast lines of ${file}:\n${lines.slice(-15).join('\n')}`;
  } catch {
    return '';
  }
}

export function registerUp(program: Command, deps: CommandDeps): void {
  const home = () => deps.io.paths.home;
  const stateFile = () => join(home(), 'up.json');
  const readState = async (): Promise<UpState> => {
    try {
      return JSON.parse(await readFile(stateFile(), 'utf8')) as UpState;
    } catch {
      return {};
    }
  };
  const writeState = (s: UpState) =>
    writeFile(stateFile(), `${JSON.stringify(s, null, 2)}\n`, { mode: 0o600 });

  program
    .command('up')
    .description('start a local tower and svcd with a demo agent (again: reuses what runs)')
    .option('--port <port>', 'tower port on 127.0.0.1 (0: any free port)', '8008')
    .option('--hostname <hostname>', 'name of this node', osHostname())
    .action(async (o: { port: string; hostname: string }, cmd: Command) => {
      const json = Boolean(globals(cmd).json);
      const say = (line: string) => {
        if (!json) deps.io.err(line);
      };
      const logs = join(home(), 'logs');
      await mkdir(logs, { recursive: true, mode: 0o700 });
      const state = await readState();
      const env = { ...deps.io.env, SVC_HOME: home() };

      // 1. The tower.
      let url: string;
      const healthy = async (u: string) =>
        (await requestJson(`${u}/healthz`, 'GET', { token: null })).status === 200;
      if (state.tower && alive(state.tower.pid) && (await healthy(state.tower.url).catch(() => false))) {
        url = state.tower.url;
        say(`tower already running at ${url} (pid ${state.tower.pid})`);
      } else {
        const log = join(logs, 'tower.log');
        const out = openSync(log, 'a');
        const mark = existsSync(log) ? readFileSync(log, 'utf8').length : 0;
        const child = spawn(
          process.execPath,
          [SVC_BIN, 'tower', 'serve', '--listen', `127.0.0.1:${o.port}`],
          {
            env,
            detached: true,
            stdio: ['ignore', out, out],
          },
        );
        child.unref();
        say(`starting the tower (log: ${log})`);
        url = await until(
          'the tower',
          30_000,
          async () => {
            if (!alive(child.pid)) throw new SvcError('unavailable', `the tower exited${tail(log)}`);
            const m = /listening on (\S+)/.exec(readFileSync(log, 'utf8').slice(mark));
            return m?.[1] && (await healthy(m[1])) ? m[1] : null;
          },
          () => tail(log),
        );
        state.tower = { pid: child.pid as number, url };
        await writeState(state);
      }
      const tokenFile = join(home(), 'tower', 'admin.token');
      const admin = readFileSync(tokenFile, 'utf8').trim();
      const call = async <T>(method: string, path: string, body?: unknown, token = admin): Promise<T> => {
        const res = await requestJson(url + path, method, { token, body });
        if (res.status >= 400) throw errorFromProblem(res.status, res.text);
        return (res.text ? JSON.parse(res.text) : undefined) as T;
      };

      // Later svc commands of this SVC_HOME talk to this tower (credentials.json), unless the
      // user logged in somewhere else.
      const creds = await readFile(deps.io.paths.credentialsFile, 'utf8')
        .then((t) => JSON.parse(t) as { url?: string; up?: boolean })
        .catch(() => null);
      if (!creds || creds.up === true) {
        await writeFile(
          deps.io.paths.credentialsFile,
          `${JSON.stringify({ url, token: admin, up: true }, null, 2)}\n`,
          {
            mode: 0o600,
          },
        );
      }

      // 2. The node (identity kept in $SVC_HOME so svc up never touches /etc/svc).
      const nodeFile = deps.io.env.SVC_NODE_FILE || join(home(), 'node.json');
      let identity = await readNodeIdentity(nodeFile).catch(() => null);
      const known =
        identity?.backend_url === url
          ? await call(`GET`, `/nodes/${identity.node_id}`).catch(() => null)
          : null;
      if (!identity || !known) {
        const reg = await call<NodeRegistered>('POST', '/nodes', { hostname: o.hostname, force: true });
        identity = { node_id: reg.id, hostname: reg.hostname, backend_url: url, jwt: reg.jwt };
        await writeNodeIdentity(nodeFile, identity);
        say(`registered node ${reg.hostname} (${reg.id})`);
      }
      state.node_file = nodeFile;

      // 3. The demo domain, mission and agent.
      const domains = await call<List<Domain>>('GET', '/domains?limit=500');
      const domain =
        domains.items.find((d) => d.name === 'demo') ??
        (await call<Domain>('POST', '/domains', { name: 'demo' }));
      const missions = await call<List<Mission>>('GET', `/domains/${domain.id}/m?limit=500`);
      const mission =
        missions.items.find((m) => m.name === 'demo') ??
        (await call<Mission>('POST', `/domains/${domain.id}/m`, { name: 'demo' }));
      let agentId = state.demo?.agent_id;
      const enrolled = agentId ? await call<Agent>('GET', `/agents/${agentId}`).catch(() => null) : null;
      if (!enrolled || enrolled.node_id !== identity.node_id) {
        const a = await call<Agent>(
          'POST',
          '/agents',
          { domain_id: domain.id, runtime: 'alpha_agent_acp', name: 'demo', capabilities: ['demo'] },
          identity.jwt,
        );
        agentId = a.id;
        say(`enrolled the demo agent ${a.id}`);
      }
      state.demo = { domain_id: domain.id, mission_id: mission.id, agent_id: agentId as string };
      const agentsFile = join(home(), 'svcd', 'agents.toml');
      if (!existsSync(agentsFile)) {
        await mkdir(join(home(), 'svcd'), { recursive: true, mode: 0o700 });
        await writeFile(
          agentsFile,
          `# Written by "svc up": the demo agent, the package's reference ACP agent.\n[[agent]]\nid = "${agentId}"\nruntime = "alpha_agent_acp"\nprofile = "${DEMO_PROFILE}"\n`,
        );
      }
      await writeState(state);

      // 4. svcd.
      const mgmtSock = daemonPaths(home()).mgmtSock;
      const status = async () =>
        mgmtCall<{ tower: { connected: boolean }; pid: number }>(mgmtSock, 'daemon.status');
      const running = await status().catch(() => null);
      if (running) {
        say(`svcd already running (pid ${running.pid})`);
        state.svcd = { pid: running.pid };
      } else {
        const log = join(logs, 'svcd.log');
        const out = openSync(log, 'a');
        const child = spawn(process.execPath, [...SVCD_NODE_FLAGS, SVCD_BIN, 'run', '--backend-url', url], {
          env: { ...env, SVC_NODE_FILE: nodeFile },
          detached: true,
          stdio: ['ignore', out, out],
        });
        child.unref();
        say(`starting svcd (log: ${log})`);
        state.svcd = { pid: child.pid as number };
        await writeState(state);
        await until(
          'svcd',
          30_000,
          async () => {
            if (!alive(child.pid)) throw new SvcError('unavailable', `svcd exited${tail(log)}`);
            const s = await status();
            return s.tower.connected ? s : null;
          },
          () => tail(log),
        );
      }
      // 5. The demo agent: svcd starts it in the background once it runs; the next command
      // printed below signals it, so wait until its session is up (under load that takes a
      // moment after svcd reports the tower connected).
      await until(
        'the demo agent',
        30_000,
        async () => {
          const list = await mgmtCall<{ items: { id: string; state: string }[] }>(mgmtSock, 'agent.list');
          const a = list.items.find((x) => x.id === agentId);
          // Not in agents.toml (a file the operator wrote): nothing of ours to wait for.
          return !a || a.state === 'running' ? list : null;
        },
        () => tail(join(logs, 'svcd.log')),
      );
      await writeState(state);

      // Run through npx (the README's first command), the next commands need npx too.
      const svc = deps.io.env.npm_command === 'exec' ? 'npx svc' : 'svc';
      const summary = {
        console_url: `${url}/`,
        tower_url: url,
        admin_token_file: tokenFile,
        node_id: identity.node_id,
        demo_agent: agentId,
        demo_domain: domain.id,
        demo_mission: mission.id,
        next: [
          `${svc} feed`,
          `${svc} agent signal ${DEMO_PROFILE} --prompt "progress: 3" --wait`,
          `${svc} agent supervise list`,
        ],
      };
      print(deps.io, json, summary, () =>
        [
          `svc is up.`,
          '',
          `  console:     ${summary.console_url}`,
          `  admin token: ${tokenFile}`,
          `  node:        ${identity.hostname} (${identity.node_id})`,
          `  demo agent:  ${agentId} (profile "${DEMO_PROFILE}")`,
          '',
          'try:',
          ...summary.next.map((c) => `  ${c}`),
          '',
          `stop with: ${svc} down`,
        ].join('\n'),
      );
    });

  program
    .command('down')
    .description('stop the tower and svcd that "svc up" started')
    .action(async (_o, cmd: Command) => {
      const state = await readState();
      const stopped: string[] = [];
      for (const [name, pid] of [
        ['svcd', state.svcd?.pid],
        ['tower', state.tower?.pid],
      ] as const) {
        if (!alive(pid)) continue;
        process.kill(pid as number, 'SIGTERM');
        const deadline = Date.now() + 15_000;
        while (alive(pid) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
        if (alive(pid)) process.kill(pid as number, 'SIGKILL');
        stopped.push(`${name} (pid ${pid})`);
      }
      delete state.svcd;
      delete state.tower;
      await writeState(state).catch(() => {});
      const out = { stopped };
      print(deps.io, Boolean(globals(cmd).json), out, () =>
        stopped.length > 0 ? `stopped ${stopped.join(' and ')}` : 'nothing was running',
      );
    });
}
