// Real svc/svcd processes for end-to-end tests: spawned from the build in dist/, with their
// own SVC_HOME; every child is tracked and killed by stopAll() (call it in afterEach/afterAll).
import { type ChildProcess, spawn } from 'node:child_process';
import { join, resolve } from 'node:path';
import { SVCD_NODE_FLAGS } from '../../src/cli/svcd-launch.js';
import { waitFor } from './poll.js';

export const SVC_BIN = resolve(import.meta.dirname, '../../dist/cli/svc.js');
export const SVCD_BIN = resolve(import.meta.dirname, '../../dist/cli/svcd.js');

export interface Proc {
  child: ChildProcess;
  stdout(): string;
  stderr(): string;
  /** Resolves with the exit code (or the signal name). */
  exited: Promise<number | string>;
  kill(signal?: NodeJS.Signals): void;
}

const running = new Set<Proc>();

export function spawnProc(bin: string, args: string[], env: NodeJS.ProcessEnv): Proc {
  // `svcd run` with the V8 flags svc daemon up and the unit give it, so tests run the daemon as
  // deployed.
  const flags = bin === SVCD_BIN && args[0] === 'run' ? SVCD_NODE_FLAGS : [];
  const child = spawn(process.execPath, [...flags, bin, ...args], {
    env: { ...process.env, ...env },
    stdio: 'pipe',
  });
  let out = '';
  let err = '';
  child.stdout?.on('data', (d: Buffer) => {
    out += d.toString();
  });
  child.stderr?.on('data', (d: Buffer) => {
    err += d.toString();
  });
  const exited = new Promise<number | string>((res) => {
    child.once('exit', (code, signal) => {
      running.delete(proc);
      res(code ?? signal ?? -1);
    });
  });
  const proc: Proc = {
    child,
    stdout: () => out,
    stderr: () => err,
    exited,
    kill: (signal = 'SIGTERM') => {
      child.kill(signal);
    },
  };
  running.add(proc);
  return proc;
}

/** Runs a command to completion; returns its exit code and output. */
export async function run(bin: string, args: string[], env: NodeJS.ProcessEnv, input?: string) {
  const p = spawnProc(bin, args, env);
  if (input !== undefined) p.child.stdin?.end(input);
  else p.child.stdin?.end();
  const code = await p.exited;
  return { code, stdout: p.stdout(), stderr: p.stderr() };
}

export async function stopAll(): Promise<void> {
  const all = [...running];
  for (const p of all) p.kill('SIGKILL');
  await Promise.all(all.map((p) => p.exited));
}

export interface TowerProc extends Proc {
  url: string;
}

/** Starts `svc tower serve` on a free port and waits for its URL. */
export async function startTowerProc(env: NodeJS.ProcessEnv, extraArgs: string[] = []): Promise<TowerProc> {
  const p = spawnProc(
    SVC_BIN,
    ['tower', 'serve', '--listen', '127.0.0.1:0', '--log-level', 'warn', ...extraArgs],
    env,
  );
  const url = await waitFor(
    'tower to listen',
    async () => {
      const code = await Promise.race([p.exited, Promise.resolve(null)]);
      if (code !== null) throw new Error(`tower exited (${code}): ${p.stderr()}`);
      return /listening on (\S+)/.exec(p.stdout())?.[1];
    },
    { timeoutMs: 90_000 },
  );
  return Object.assign(p, { url });
}

/**
 * The environment for a node's processes in a test: this process's environment without any
 * SVC_*, XDG_*, D-Bus or tmux variables (so nothing of the developer's setup leaks in), with
 * HOME and SVC_HOME under `dir` and the node identity in SVC_HOME.
 */
export function isolatedEnv(dir: string, homeName = 'home'): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) {
    if (
      k.startsWith('SVC_') ||
      k.startsWith('XDG_') ||
      k === 'DBUS_SESSION_BUS_ADDRESS' ||
      k.startsWith('TMUX')
    )
      continue;
    env[k] = v;
  }
  const home = join(dir, homeName);
  return Object.assign(env, {
    HOME: join(dir, 'user'),
    SVC_HOME: home,
    SVC_NODE_FILE: join(home, 'node.json'),
  });
}
