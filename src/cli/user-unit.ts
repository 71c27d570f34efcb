// systemd user units svc writes for its own long-running processes (svcd: `svc daemon
// install-unit` and `svc daemon up`; the tower: `svc tower install-unit`): where they go, their
// text, and `systemctl --user`. One unit shape for both (docs/operator-guide.md): restarted on
// failure after 5 s, environment from a file in SVC_HOME, after the network is online, wanted
// by the default target.
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { chmod, mkdir, writeFile } from 'node:fs/promises';
import { homedir } from 'node:os';
import { join, resolve } from 'node:path';

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

/** One word of an ExecStart= or Environment= line, quoted the way systemd splits them. */
export function unitWord(s: string): string {
  return /[\s"'\\]/.test(s) ? `"${s.replace(/(["\\])/g, '\\$1')}"` : s;
}

export interface UserUnit {
  description: string;
  /** SVC_HOME of the unit's process; null when it is ~/.svc (the unit then says %h/.svc). */
  home: string;
  userHome: string;
  /** Name of the environment file in SVC_HOME (KEY=value lines), e.g. `svcd.env`. */
  envFile: string;
  exec: string[];
}

/** The environment file's path as the unit names it (%h when SVC_HOME is ~/.svc). */
function envFileOf(u: Pick<UserUnit, 'home' | 'userHome' | 'envFile'>): {
  path: string;
  defaultHome: boolean;
} {
  const defaultHome = resolve(u.home) === resolve(u.userHome, '.svc');
  return { path: defaultHome ? `%h/.svc/${u.envFile}` : join(u.home, u.envFile), defaultHome };
}

export function renderUserUnit(u: UserUnit): string {
  const env = envFileOf(u);
  return [
    '[Unit]',
    `Description=${u.description}`,
    'Wants=network-online.target',
    'After=network-online.target',
    '',
    '[Service]',
    'Type=simple',
    ...(env.defaultHome ? [] : [`Environment=SVC_HOME=${unitWord(u.home)}`]),
    `EnvironmentFile=${env.path}`,
    `ExecStart=${u.exec.map(unitWord).join(' ')}`,
    'Restart=on-failure',
    'RestartSec=5',
    '',
    '[Install]',
    'WantedBy=default.target',
    '',
  ].join('\n');
}

/**
 * Writes the unit `name` into the user unit directory and, when missing, its environment file
 * (0600, a comment only) in SVC_HOME. Returns both paths.
 */
export async function installUserUnit(
  env: NodeJS.ProcessEnv,
  name: string,
  unit: UserUnit,
  envComment: string,
): Promise<{ unitFile: string; envFile: string }> {
  const dir = unitDir(env);
  await mkdir(dir, { recursive: true });
  const unitFile = join(dir, name);
  await writeFile(unitFile, renderUserUnit(unit));
  await mkdir(unit.home, { recursive: true, mode: 0o700 });
  const envFile = join(unit.home, unit.envFile);
  if (!existsSync(envFile)) {
    await writeFile(envFile, `# ${envComment} (KEY=value lines).\n`, { mode: 0o600 });
    await chmod(envFile, 0o600);
  }
  return { unitFile, envFile };
}

/** `systemctl --user …`: its exit code and output (stdout and stderr, trimmed). */
export function systemctlUser(
  args: string[],
  env: NodeJS.ProcessEnv,
): Promise<{ code: number; out: string }> {
  return new Promise((res) => {
    execFile('systemctl', ['--user', ...args], { env, timeout: 30_000 }, (err, stdout, stderr) => {
      const code = err ? (typeof err.code === 'number' ? err.code : 1) : 0;
      res({ code, out: `${stdout}${stderr}`.trim() });
    });
  });
}
