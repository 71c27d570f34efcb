// `svc up` / `svc down`: the one-command local start. A tower (embedded SQLite in
// $SVC_HOME/tower) and svcd run in the background, the node is registered, and a demo agent of
// the reference ACP runtime is enrolled and supervised. Running `svc up` again reuses what runs;
// `svc down` stops svcd (whoever started it), the agents that outlive it (tmux sessions,
// systemd units) and the tower. The tower and the demo are recorded in $SVC_HOME/up.json, svcd
// in $SVC_HOME/svcd/daemon.json as `svc daemon up` records it.
import { existsSync, readFileSync } from 'node:fs';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { hostname as osHostname } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Command } from 'commander';
import { loadSvcdConfig } from '../../daemon/config/config.js';
import { readNodeIdentity, writeNodeIdentity } from '../../daemon/identity.js';
import { daemonPaths } from '../../daemon/paths.js';
import { exec } from '../../daemon/process/exec.js';
import { tmuxSocketOf } from '../../daemon/supervisor/backends/tmux.js';
import { systemClock } from '../../lib/clock.js';
import { requestJson } from '../../lib/http.js';
import type { List } from '../../protocol/common.js';
import { errorFromProblem, SvcError } from '../../protocol/errors.js';
import type { Agent } from '../../protocol/mesh.js';
import type { NodeRegistered } from '../../protocol/nodes.js';
import type { Domain, Mission } from '../../protocol/records.js';
import { exitedError, logTail, startDetached, waitReady } from '../background.js';
import { type CommandDeps, globals } from '../deps.js';
import { ensureDir, skillsHome } from '../doctor/homes.js';
import { mgmtCall } from '../mgmt-client.js';
import { print } from '../output.js';
import { UsageError } from '../run.js';
import { alive, chooseBooster, readDaemonRecord, startSvcd, stopSvcd, svcdStatus } from '../svcd-process.js';

const SVC_BIN = fileURLToPath(new URL('../svc.js', import.meta.url));
const DEMO_PROFILE = 'demo';

interface UpState {
  tower?: { pid: number; url: string };
  node_file?: string;
  demo?: { domain_id: string; mission_id: string; agent_id: string };
}

/** Why the tower of `svc up` exited at start, with what to do about a port in use. */
export function towerExitError(port: string, exit: number | string, output: string): SvcError {
  if (/EADDRINUSE|address already in use/.test(output)) {
    return new SvcError(
      'unavailable',
      [
        `the tower cannot listen on 127.0.0.1:${port}: the port is in use.`,
        '  another "svc up" may run with this SVC_HOME: svc down (or with that install\'s SVC_HOME set)',
        '  or start on another port: svc up --port <N> (0 picks a free one)',
        output,
      ].join('\n'),
    );
  }
  return exitedError('the tower', exit, output);
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
    // Long: a start that fails ends the wait at once (the child's exit); only a start that
    // hangs waits this out, and a loaded machine can take tens of seconds to start a tower.
    .option('--timeout <seconds>', 'how long to wait for each part to come up', '120')
    .action(async (o: { port: string; hostname: string; timeout: string }, cmd: Command) => {
      const json = Boolean(globals(cmd).json);
      const startTimeoutMs = Number(o.timeout) * 1000;
      if (!Number.isFinite(startTimeoutMs) || startTimeoutMs <= 0) {
        throw new UsageError(`--timeout must be a positive number of seconds, not "${o.timeout}"`);
      }
      const say = (line: string) => {
        if (!json) deps.io.err(line);
      };
      const logs = join(home(), 'logs');
      await mkdir(logs, { recursive: true, mode: 0o700 });
      // What `svc system doctor --fix` would create, so the doctor passes right after svc up.
      const skills = await ensureDir('svc_skills_home', skillsHome(deps.io.env, home()).path);
      if (skills.changed) say(`svc_skills_home: ${skills.action}`);
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
        const child = startDetached({
          argv: [process.execPath, SVC_BIN, 'tower', 'serve', '--listen', `127.0.0.1:${o.port}`],
          env,
          log,
        });
        say(`starting the tower (log: ${log})`);
        url = await waitReady({
          what: 'the tower',
          child,
          timeoutMs: startTimeoutMs,
          clock: systemClock,
          ready: async () => {
            const m = /listening on (\S+)/.exec(child.output());
            return m?.[1] && (await healthy(m[1])) ? m[1] : null;
          },
          onExit: (exit, output) => towerExitError(o.port, exit, output),
          hint: () => logTail(log),
        });
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

      // 4. svcd, started as `svc daemon up --no-systemd` would (same record, same booster).
      const mgmtSock = daemonPaths(home()).mgmtSock;
      const running = await svcdStatus(home()).catch(() => null);
      if (running) {
        say(`svcd already running (pid ${running.pid})`);
      } else {
        const log = join(logs, 'svcd.log');
        const booster = chooseBooster(undefined, await readDaemonRecord(home()));
        say(`starting svcd (log: ${log})`);
        if (booster.path) say(`with the booster of its last start, ${booster.path}`);
        await startSvcd({
          home: home(),
          env: { ...env, SVC_NODE_FILE: nodeFile },
          url,
          boosterWasm: booster.path,
          systemd: false,
          timeoutMs: startTimeoutMs,
          clock: systemClock,
          log,
          ready: (s) => s.tower?.connected === true,
        });
      }
      // 5. The demo agent: svcd starts it in the background once it runs; the next command
      // printed below signals it, so wait until its session is up (under load that takes a
      // moment after svcd reports the tower connected).
      await waitReady({
        what: 'the demo agent',
        child: null,
        timeoutMs: startTimeoutMs,
        clock: systemClock,
        ready: async () => {
          const list = await mgmtCall<{ items: { id: string; state: string }[] }>(mgmtSock, 'agent.list');
          const a = list.items.find((x) => x.id === agentId);
          // Not in agents.toml (a file the operator wrote): nothing of ours to wait for.
          return !a || a.state === 'running' ? list : null;
        },
        hint: () => logTail(join(logs, 'svcd.log')),
      });
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
    .description(
      'stop svcd, the agents that outlive it (tmux sessions, systemd units), and the tower "svc up" started',
    )
    .action(async (_o, cmd: Command) => {
      const state = await readState();
      const stopped: string[] = [];
      const agents = await stopLingeringAgents(home());
      const svcd = await stopSvcd({ home: home(), env: deps.io.env, timeoutMs: 15_000, clock: systemClock });
      if (svcd.stopped) stopped.push(`svcd${svcd.pid ? ` (pid ${svcd.pid})` : ''}`);
      if (agents.length > 0) stopped.push(`agents ${agents.join(', ')}`);
      // svcd was not there to stop its tmux agents: end this home's tmux server itself.
      if (!svcd.stopped && (await killOwnTmuxServer(home(), deps.io.env))) stopped.push('tmux sessions');
      const pid = state.tower?.pid;
      if (alive(pid)) {
        process.kill(pid as number, 'SIGTERM');
        const deadline = systemClock.now() + 15_000;
        while (alive(pid) && systemClock.now() < deadline) await systemClock.sleep(100);
        if (alive(pid)) process.kill(pid as number, 'SIGKILL');
        stopped.push(`tower (pid ${pid})`);
      }
      delete state.tower;
      await writeState(state).catch(() => {});
      const out = { stopped };
      print(deps.io, Boolean(globals(cmd).json), out, () =>
        stopped.length > 0 ? `stopped ${stopped.join(', ')}` : 'nothing was running',
      );
    });
}

/**
 * Stops, through svcd, the running agents whose units outlive it (tmux sessions, systemd
 * units; process units end with svcd). The stop is not remembered: the next svcd starts them
 * as agents.toml says. Returns their ids; none when svcd does not answer.
 */
async function stopLingeringAgents(home: string): Promise<string[]> {
  const sock = daemonPaths(home).mgmtSock;
  const list = await mgmtCall<{ items: { id: string; backend: string; state: string }[] }>(
    sock,
    'agent.list',
  ).catch(() => null);
  const lingering = (list?.items ?? []).filter((a) => a.backend !== 'process' && a.state === 'running');
  for (const a of lingering) await mgmtCall(sock, 'agent.stop', { id: a.id });
  return lingering.map((a) => a.id);
}

/**
 * Ends the tmux server of this SVC_HOME (its mux_hosted agents' sessions), only when it is the
 * home's own (tmux_socket not set in config.toml: a shared socket may hold others' sessions).
 * True when a server was running.
 */
async function killOwnTmuxServer(home: string, env: NodeJS.ProcessEnv): Promise<boolean> {
  const config = await loadSvcdConfig(daemonPaths(home).configToml).catch(() => null);
  if (!config || config.supervisor.tmuxSocket !== null) return false;
  const tmuxEnv = { ...env, TMUX: undefined, TMUX_PANE: undefined };
  const r = await exec(['tmux', '-L', tmuxSocketOf(home), 'kill-server'], tmuxEnv).catch(() => null);
  return r?.code === 0;
}
