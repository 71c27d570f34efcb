// The local svcd in the background, for `svc daemon up|down` and `svc up|down`: started as
// the systemd user unit (when asked and a user bus exists) or as a detached process with a pid
// file and a log. What was started is recorded in $SVC_HOME/svcd/daemon.json (mode, pid, tower
// URL, booster, log): a later plain `up` starts with the same booster, and `down` finds the
// daemon even when another command started it.
import { existsSync } from 'node:fs';
import { mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import { homedir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { daemonPaths } from '../daemon/paths.js';
import type { Clock } from '../lib/clock.js';
import { EXIT } from '../lib/exit-codes.js';
import { SvcError } from '../protocol/errors.js';
import { type Detached, exitedError, logTail, startDetached, waitReady } from './background.js';
import { mgmtCall } from './mgmt-client.js';
import { SVCD_NODE_FLAGS } from './svcd-launch.js';
import { hasUserBus, installUserUnit, systemctlUser, type UserUnit } from './user-unit.js';

export const SVCD_BIN = fileURLToPath(new URL('./svcd.js', import.meta.url));
export const SVCD_UNIT = 'svcd.service';

export interface DaemonRecord {
  mode: 'systemd' | 'detached';
  pid?: number;
  backend_url: string;
  booster_wasm?: string;
  log?: string;
}

export type DaemonStatus = Record<string, unknown> & { pid: number; tower?: { connected?: boolean } };

const recordFile = (home: string) => join(daemonPaths(home).svcdDir, 'daemon.json');
const pidFile = (home: string) => join(daemonPaths(home).svcdDir, 'svcd.pid');

export async function readDaemonRecord(home: string): Promise<DaemonRecord | null> {
  return readFile(recordFile(home), 'utf8')
    .then((t) => JSON.parse(t) as DaemonRecord)
    .catch(() => null);
}

/** daemon.status over this home's mgmt.sock; rejects when svcd does not answer. */
export function svcdStatus(home: string): Promise<DaemonStatus> {
  return mgmtCall<DaemonStatus>(daemonPaths(home).mgmtSock, 'daemon.status');
}

/** The svcd user unit (docs/operator-guide.md, 6): `svcd run --backend-url URL` with svcd's V8 flags. */
export function svcdUnit(o: {
  backendUrl: string;
  home: string;
  userHome: string;
  nodeBin?: string;
  svcdBin?: string;
  boosterWasm?: string;
}): UserUnit {
  const exec = [
    o.nodeBin ?? process.execPath,
    ...SVCD_NODE_FLAGS,
    o.svcdBin ?? SVCD_BIN,
    'run',
    '--backend-url',
    o.backendUrl,
  ];
  if (o.boosterWasm) exec.push('--booster-wasm', o.boosterWasm);
  return {
    description: 'svcd: the svc node work-executor daemon',
    home: o.home,
    userHome: o.userHome,
    envFile: 'svcd.env',
    exec,
  };
}

export function installSvcdUnit(
  env: NodeJS.ProcessEnv,
  home: string,
  url: string,
  boosterWasm: string | null,
) {
  return installUserUnit(
    env,
    SVCD_UNIT,
    svcdUnit({
      backendUrl: url,
      home,
      userHome: env.HOME || homedir(),
      ...(boosterWasm ? { boosterWasm } : {}),
    }),
    'Environment of the svcd user unit',
  );
}

/** The Wasm booster of a start, and whether it comes from the last start's record. */
export interface BoosterChoice {
  path: string | null;
  remembered: boolean;
}

/**
 * `--booster-wasm PATH` (must exist), `--no-booster-wasm` (false: none), or neither: the
 * booster of the last start, so a plain `svc daemon up` never silently drops it.
 */
export function chooseBooster(flag: string | false | undefined, record: DaemonRecord | null): BoosterChoice {
  if (flag === false) return { path: null, remembered: false };
  if (flag !== undefined) {
    const path = resolve(flag);
    if (!existsSync(path))
      throw new SvcError('config_invalid', `--booster-wasm ${flag}: no such file (${path})`);
    return { path, remembered: false };
  }
  const last = record?.booster_wasm;
  if (!last) return { path: null, remembered: false };
  if (!existsSync(last)) {
    throw new SvcError(
      'config_invalid',
      `svcd last started with --booster-wasm ${last}, which is gone: pass --booster-wasm PATH, or --no-booster-wasm to start without one`,
    );
  }
  return { path: last, remembered: true };
}

export interface SvcdStart {
  home: string;
  env: NodeJS.ProcessEnv;
  url: string;
  boosterWasm: string | null;
  /** Use the systemd user unit when a user bus exists. */
  systemd: boolean;
  timeoutMs: number;
  clock: Clock;
  /** Where a detached svcd logs (default $SVC_HOME/svcd/logs/svcd.log). */
  log?: string;
  /** Ready when this holds for daemon.status (default: svcd answers). */
  ready?: (s: DaemonStatus) => boolean;
}

/** Starts svcd in the background and waits until it is ready, or throws why it is not. */
export async function startSvcd(o: SvcdStart): Promise<{ record: DaemonRecord; status: DaemonStatus }> {
  const paths = daemonPaths(o.home);
  await mkdir(paths.svcdDir, { recursive: true, mode: 0o700 });
  await mkdir(paths.logsDir, { recursive: true, mode: 0o700 });
  const booster = o.boosterWasm ? { booster_wasm: o.boosterWasm } : {};
  let record: DaemonRecord;
  let child: Detached | null = null;
  let hint: () => string;
  if (o.systemd && hasUserBus(o.env)) {
    const { unitFile } = await installSvcdUnit(o.env, o.home, o.url, o.boosterWasm);
    const reload = await systemctlUser(['daemon-reload'], o.env);
    const start = reload.code === 0 ? await systemctlUser(['restart', SVCD_UNIT], o.env) : reload;
    if (start.code !== 0) {
      throw new SvcError(
        'unavailable',
        `systemctl --user could not start ${unitFile}: ${start.out}; retry with --no-systemd for a detached svcd`,
      );
    }
    record = { mode: 'systemd', backend_url: o.url, ...booster };
    hint = () => `\nsee: journalctl --user -u ${SVCD_UNIT} -n 50`;
  } else {
    const log = o.log ?? join(paths.logsDir, 'svcd.log');
    await mkdir(dirname(log), { recursive: true, mode: 0o700 });
    const argv = [process.execPath, ...SVCD_NODE_FLAGS, SVCD_BIN, 'run', '--backend-url', o.url];
    if (o.boosterWasm) argv.push('--booster-wasm', o.boosterWasm);
    child = startDetached({ argv, env: o.env, log });
    await writeFile(pidFile(o.home), `${child.pid}\n`, { mode: 0o600 });
    record = { mode: 'detached', pid: child.pid, backend_url: o.url, log, ...booster };
    hint = () => logTail(log);
  }
  await writeFile(recordFile(o.home), `${JSON.stringify(record, null, 2)}\n`, { mode: 0o600 });
  try {
    const status = await waitReady({
      what: 'svcd',
      child,
      timeoutMs: o.timeoutMs,
      clock: o.clock,
      ready: async () => {
        const s = await svcdStatus(o.home);
        return !o.ready || o.ready(s) ? s : null;
      },
      onExit: (exit, output) =>
        exit === EXIT.config
          ? new SvcError('config_invalid', `svcd refused to start:\n${output}`)
          : exitedError('svcd', exit, output),
      hint: () => ` (${paths.mgmtSock})${hint()}`,
    });
    return { record, status };
  } catch (e) {
    if (child && child.exited() !== null) await rm(pidFile(o.home), { force: true });
    throw e;
  }
}

/**
 * Stops this home's svcd: through systemd when it started it, else SIGTERM (SIGKILL after
 * timeoutMs) to the pid mgmt.sock reports, or to the recorded pid when svcd does not answer.
 */
export async function stopSvcd(o: {
  home: string;
  env: NodeJS.ProcessEnv;
  timeoutMs: number;
  clock: Clock;
}): Promise<{ stopped: boolean; pid: number | null; how: 'signal' | 'systemd' | 'SIGKILL' }> {
  const record = await readDaemonRecord(o.home);
  let pid = (await svcdStatus(o.home).catch(() => null))?.pid;
  let how: 'signal' | 'systemd' | 'SIGKILL' = 'signal';
  if (record?.mode === 'systemd' && hasUserBus(o.env)) {
    const r = await systemctlUser(['stop', SVCD_UNIT], o.env);
    if (r.code === 0) how = 'systemd';
  }
  if (!pid) {
    const fromFile = Number(await readFile(pidFile(o.home), 'utf8').catch(() => ''));
    if (alive(fromFile) && fromFile === record?.pid) pid = fromFile;
  }
  if (pid && alive(pid)) {
    process.kill(pid, 'SIGTERM');
    const deadline = o.clock.now() + o.timeoutMs;
    while (alive(pid) && o.clock.now() < deadline) await o.clock.sleep(100);
    if (alive(pid)) {
      process.kill(pid, 'SIGKILL');
      how = 'SIGKILL';
    }
  }
  await rm(pidFile(o.home), { force: true });
  return { stopped: Boolean(pid) || how === 'systemd', pid: pid ?? null, how };
}

export function alive(pid: number | undefined): boolean {
  if (!pid) return false;
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}
