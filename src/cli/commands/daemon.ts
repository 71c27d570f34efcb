// `svc daemon …`: the local svcd. `status` asks mgmt.sock; `up` starts svcd in the background
// (the systemd user unit when a user bus exists, else a detached process with a pid file and a
// log file) and waits until mgmt.sock answers; `down` stops it; `install-unit` writes the user
// unit (docs/operator-guide.md, 6).
import { execFile, spawn } from 'node:child_process';
import { existsSync, openSync, readFileSync } from 'node:fs';
import { chmod, mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import { homedir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Command } from 'commander';
import { nodeFileForRead, readNodeIdentity } from '../../daemon/identity.js';
import { daemonPaths } from '../../daemon/paths.js';
import { EXIT } from '../../lib/exit-codes.js';
import { DEFAULT_BASE_URL } from '../../lib/url.js';
import { SvcError } from '../../protocol/errors.js';
import { type CommandDeps, globals } from '../deps.js';
import { mgmtCall } from '../mgmt-client.js';
import { keyValues, print } from '../output.js';
import { UsageError } from '../run.js';
import { SVCD_NODE_FLAGS } from '../svcd-launch.js';

const SVCD_BIN = fileURLToPath(new URL('../svcd.js', import.meta.url));
export const UNIT_NAME = 'svcd.service';

interface UpFlags {
  backendUrl?: string;
  boosterWasm?: string;
  timeout: string;
  systemd: boolean;
}

interface DaemonRecord {
  mode: 'systemd' | 'detached';
  pid?: number;
  backend_url: string;
  booster_wasm?: string;
  log?: string;
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

function tail(file: string, n = 20): string {
  try {
    const lines = readFileSync(file, 'utf8').trim().split('\n');
    return `\nlast lines of ${file}:\n${lines.slice(-n).join('\n')}`;
  } catch {
    return '';
  }
}

function sh(cmd: string, args: string[], env: NodeJS.ProcessEnv): Promise<{ code: number; out: string }> {
  return new Promise((res) => {
    execFile(cmd, args, { env, timeout: 30_000 }, (err, stdout, stderr) => {
      const code = err ? (typeof err.code === 'number' ? err.code : 1) : 0;
      res({ code, out: `${stdout}${stderr}`.trim() });
    });
  });
}

/** A systemd user manager to talk to: a session bus in the environment or at the usual place. */
export function hasUserBus(env: NodeJS.ProcessEnv): boolean {
  if (env.DBUS_SESSION_BUS_ADDRESS) return true;
  return Boolean(env.XDG_RUNTIME_DIR && existsSync(join(env.XDG_RUNTIME_DIR, 'bus')));
}

/** The user unit directory: $XDG_CONFIG_HOME/systemd/user, else ~/.config/systemd/user. */
export function unitDir(env: NodeJS.ProcessEnv): string {
  const config = env.XDG_CONFIG_HOME || join(env.HOME || homedir(), '.config');
  return join(config, 'systemd', 'user');
}

/**
 * The user unit (docs/operator-guide.md, 6): svcd run --backend-url URL, restarted on failure after 5 s, its
 * environment from the svcd.env file in the user's .svc directory, after the network is
 * online, wanted by the default target.
 */
export function unitFile(o: {
  backendUrl: string;
  home: string;
  userHome: string;
  nodeBin?: string;
  svcdBin?: string;
  boosterWasm?: string;
}): string {
  const q = (s: string) => (/[\s"'\\]/.test(s) ? `"${s.replace(/(["\\])/g, '\\$1')}"` : s);
  const defaultHome = resolve(o.home) === resolve(o.userHome, '.svc');
  const envFile = defaultHome ? '%h/.svc/svcd.env' : join(o.home, 'svcd.env');
  const exec = [
    o.nodeBin ?? process.execPath,
    ...SVCD_NODE_FLAGS,
    o.svcdBin ?? SVCD_BIN,
    'run',
    '--backend-url',
    o.backendUrl,
  ];
  if (o.boosterWasm) exec.push('--booster-wasm', o.boosterWasm);
  return [
    '[Unit]',
    'Description=svcd: the svc node work-executor daemon',
    'Wants=network-online.target',
    'After=network-online.target',
    '',
    '[Service]',
    'Type=simple',
    ...(defaultHome ? [] : [`Environment=SVC_HOME=${q(o.home)}`]),
    `EnvironmentFile=${envFile}`,
    `ExecStart=${exec.map(q).join(' ')}`,
    'Restart=on-failure',
    'RestartSec=5',
    '',
    '[Install]',
    'WantedBy=default.target',
    '',
  ].join('\n');
}

export function registerDaemonCommands(daemon: Command, deps: CommandDeps): void {
  const home = () => deps.io.paths.home;
  const paths = () => daemonPaths(home());
  const recordFile = () => join(paths().svcdDir, 'daemon.json');
  const pidFile = () => join(paths().svcdDir, 'svcd.pid');
  const readRecord = async (): Promise<DaemonRecord | null> =>
    readFile(recordFile(), 'utf8')
      .then((t) => JSON.parse(t) as DaemonRecord)
      .catch(() => null);
  const status = () => mgmtCall<Record<string, unknown> & { pid: number }>(paths().mgmtSock, 'daemon.status');

  async function backendUrl(flag: string | undefined): Promise<string> {
    if (flag) return flag;
    const env = deps.io.env;
    if (env.SVC_BASE_URL) return env.SVC_BASE_URL;
    const id = await readNodeIdentity(nodeFileForRead(env, home()), { shared: 'report' }).catch(() => null);
    return id?.backend_url ?? DEFAULT_BASE_URL;
  }

  /** Writes the unit (and an empty svcd.env, 0600, when missing); returns the unit's path. */
  async function installUnit(url: string, boosterWasm: string | undefined): Promise<string> {
    const env = deps.io.env;
    const dir = unitDir(env);
    await mkdir(dir, { recursive: true });
    const file = join(dir, UNIT_NAME);
    const userHome = env.HOME || homedir();
    await writeFile(
      file,
      unitFile({ backendUrl: url, home: home(), userHome, ...(boosterWasm ? { boosterWasm } : {}) }),
    );
    await mkdir(home(), { recursive: true, mode: 0o700 });
    const envFile = join(home(), 'svcd.env');
    if (!existsSync(envFile)) {
      await writeFile(envFile, '# Environment of the svcd user unit (KEY=value lines).\n', { mode: 0o600 });
      await chmod(envFile, 0o600);
    }
    return file;
  }

  daemon
    .command('status')
    .description("the local svcd's version, uptime, tower connectivity and components")
    .action(async (_o, cmd: Command) => {
      const s = await status();
      print(deps.io, Boolean(globals(cmd).json), s, () => keyValues(s));
    });

  daemon
    .command('up')
    .description('start svcd in the background and wait until it answers on mgmt.sock')
    .option('--backend-url <url>', 'tower URL (default: SVC_BASE_URL, the node identity)')
    .option('--booster-wasm <path>', 'Wasm validation module, passed to svcd run')
    .option('--timeout <seconds>', 'how long to wait for mgmt.sock', '30')
    .option('--no-systemd', 'start a detached process even when a systemd user bus exists')
    .action(async (o: UpFlags, cmd: Command) => {
      const json = Boolean(globals(cmd).json);
      const env = deps.io.env;
      const running = await status().catch(() => null);
      if (running) {
        const out = { already_running: true, pid: running.pid, mgmt_sock: paths().mgmtSock };
        print(deps.io, json, out, () => `svcd already running (pid ${running.pid})`);
        return;
      }
      const url = await backendUrl(o.backendUrl);
      const timeoutMs = Number(o.timeout) * 1000;
      if (!Number.isFinite(timeoutMs) || timeoutMs <= 0) {
        throw new UsageError(`--timeout must be a positive number of seconds, not "${o.timeout}"`);
      }
      await mkdir(paths().svcdDir, { recursive: true, mode: 0o700 });
      await mkdir(paths().logsDir, { recursive: true, mode: 0o700 });
      const boosterWasm = o.boosterWasm ? resolve(o.boosterWasm) : undefined;
      let record: DaemonRecord;
      let exitedEarly: () => Promise<string | null>;
      let logHint: () => string;
      if (o.systemd && hasUserBus(env)) {
        const unit = await installUnit(url, boosterWasm);
        const reload = await sh('systemctl', ['--user', 'daemon-reload'], env);
        const start =
          reload.code === 0 ? await sh('systemctl', ['--user', 'restart', UNIT_NAME], env) : reload;
        if (start.code !== 0) {
          throw new SvcError(
            'unavailable',
            `systemctl --user could not start ${unit}: ${start.out}; retry with --no-systemd for a detached svcd`,
          );
        }
        record = { mode: 'systemd', backend_url: url, ...(boosterWasm ? { booster_wasm: boosterWasm } : {}) };
        exitedEarly = async () => null;
        logHint = () => `\nsee: journalctl --user -u ${UNIT_NAME} -n 50`;
      } else {
        const log = join(paths().logsDir, 'svcd.log');
        const mark = existsSync(log) ? readFileSync(log, 'utf8').length : 0;
        const out = openSync(log, 'a');
        const args = [...SVCD_NODE_FLAGS, SVCD_BIN, 'run', '--backend-url', url];
        if (boosterWasm) args.push('--booster-wasm', boosterWasm);
        const child = spawn(process.execPath, args, { env, detached: true, stdio: ['ignore', out, out] });
        let exit: number | string | null = null;
        child.once('exit', (code, signal) => {
          exit = code ?? signal ?? -1;
        });
        child.unref();
        await writeFile(pidFile(), `${child.pid}\n`, { mode: 0o600 });
        record = {
          mode: 'detached',
          pid: child.pid as number,
          backend_url: url,
          log,
          ...(boosterWasm ? { booster_wasm: boosterWasm } : {}),
        };
        const since = () => {
          try {
            return readFileSync(log, 'utf8').slice(mark).trim();
          } catch {
            return '';
          }
        };
        exitedEarly = async () => {
          if (exit === null) return null;
          const text = since();
          if (exit === EXIT.config) throw new SvcError('config_invalid', `svcd refused to start:\n${text}`);
          return `svcd exited (${exit}):\n${text}`;
        };
        logHint = () => tail(log);
      }
      await writeFile(recordFile(), `${JSON.stringify(record, null, 2)}\n`, { mode: 0o600 });
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        const s = await status().catch(() => null);
        if (s) {
          const out = {
            pid: s.pid,
            mode: record.mode,
            backend_url: url,
            mgmt_sock: paths().mgmtSock,
            log: record.log,
            ...(record.booster_wasm ? { booster_wasm: record.booster_wasm } : {}),
          };
          print(deps.io, json, out, () => `svcd started (pid ${s.pid}, ${record.mode}, tower ${url})`);
          return;
        }
        const early = await exitedEarly();
        if (early) {
          await rm(pidFile(), { force: true });
          throw new SvcError('unavailable', early);
        }
        if (Date.now() > deadline) {
          throw new SvcError(
            'unavailable',
            `svcd did not answer on ${paths().mgmtSock} within ${o.timeout} s${logHint()}`,
          );
        }
        await new Promise((r) => setTimeout(r, 100));
      }
    });

  daemon
    .command('down')
    .description('stop the local svcd (SIGTERM; SIGKILL after --timeout)')
    .option('--timeout <seconds>', 'how long to wait for a clean exit', '15')
    .action(async (o: { timeout: string }, cmd: Command) => {
      const json = Boolean(globals(cmd).json);
      const record = await readRecord();
      let pid = (await status().catch(() => null))?.pid;
      let how = 'signal';
      if (record?.mode === 'systemd' && hasUserBus(deps.io.env)) {
        const r = await sh('systemctl', ['--user', 'stop', UNIT_NAME], deps.io.env);
        if (r.code === 0) how = 'systemd';
      }
      if (!pid) {
        const fromFile = Number(await readFile(pidFile(), 'utf8').catch(() => ''));
        if (alive(fromFile) && fromFile === record?.pid) pid = fromFile;
      }
      if (pid && alive(pid)) {
        process.kill(pid, 'SIGTERM');
        const deadline = Date.now() + Number(o.timeout) * 1000;
        while (alive(pid) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
        if (alive(pid)) {
          process.kill(pid, 'SIGKILL');
          how = 'SIGKILL';
        }
      }
      await rm(pidFile(), { force: true });
      const out = { stopped: Boolean(pid) || how === 'systemd', pid: pid ?? null, how };
      print(deps.io, json, out, () =>
        out.stopped ? `svcd stopped${pid ? ` (pid ${pid})` : ''}` : 'svcd was not running',
      );
    });

  daemon
    .command('install-unit')
    .description('write the systemd user unit for svcd and print how to enable it')
    .option('--backend-url <url>', 'tower URL (default: SVC_BASE_URL, the node identity)')
    .option('--booster-wasm <path>', 'Wasm validation module, passed to svcd run')
    .action(async (o: { backendUrl?: string; boosterWasm?: string }, cmd: Command) => {
      const url = await backendUrl(o.backendUrl);
      const file = await installUnit(url, o.boosterWasm ? resolve(o.boosterWasm) : undefined);
      const next = [
        'systemctl --user daemon-reload',
        `systemctl --user enable --now ${UNIT_NAME}`,
        'loginctl enable-linger "$USER"   # keep it running after logout',
      ];
      const out = { unit_file: file, env_file: join(home(), 'svcd.env'), backend_url: url, next };
      print(deps.io, Boolean(globals(cmd).json), out, () =>
        [`wrote ${file}`, '', 'enable it with:', ...next.map((c) => `  ${c}`)].join('\n'),
      );
    });
}
