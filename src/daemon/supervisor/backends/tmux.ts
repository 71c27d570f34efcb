// The tmux backend (runtime mux_hosted): one detached tmux session per agent on svcd's own
// tmux server socket (tmux -L <socket>, one per SVC_HOME). The session outlives svcd and is
// re-adopted by the next one. Output is piped (pipe-pane) into `svcd log-pipe`, which rotates
// it by size. `signal` types the prompt into the pane and presses Enter.
import { createHash } from 'node:crypto';
import { resolve } from 'node:path';
import type { Clock } from '../../../lib/clock.js';
import { SvcError } from '../../../protocol/errors.js';
import { exec } from '../../process/exec.js';
import { stopGroup } from '../../process/group.js';
import type { RunningUnit, UnitBackend, UnitLaunch } from './types.js';

export interface TmuxBackendDeps {
  /** tmux -L socket name. */
  socket: () => string;
  /** Environment tmux itself runs with (PATH to find it; the server inherits it). */
  env: NodeJS.ProcessEnv;
  waits: Clock;
  stopGraceMs: () => number;
  /** argv prefix that runs this install's svcd (for log-pipe). */
  self: string[];
}

/**
 * The tmux socket name of an SVC_HOME: `svc-` and 12 hex digits of the SHA-256 of its absolute
 * path, so each install has its own tmux server (sessions of one never clash with, or are
 * adopted by, another's), and the same home always finds its sessions again. A name, not a
 * path (tmux -L: under tmux's own directory), since a socket path under a deep SVC_HOME can
 * exceed the 107 bytes a unix socket path may have.
 */
export function tmuxSocketOf(home: string): string {
  return `svc-${createHash('sha256').update(resolve(home)).digest('hex').slice(0, 12)}`;
}

/** Names of the agent-specific variables: those that differ from what tmux itself runs with. */
function agentVarNames(env: NodeJS.ProcessEnv, base: NodeJS.ProcessEnv): string[] {
  return Object.entries(env)
    .filter(([k, v]) => v !== undefined && base[k] !== v)
    .map(([k]) => k);
}

/**
 * tmux splits its argv into commands at arguments ending in ";" (our separators below); an
 * argument of the agent that ends in ";" is escaped as "\;", which tmux turns back into ";".
 */
export function tmuxArg(a: string): string {
  return a.endsWith(';') ? `${a.slice(0, -1)}\\;` : a;
}

/** Quotes one word for the shell tmux runs pipe-pane commands with. */
export function shellQuote(s: string): string {
  return `'${s.replace(/'/g, `'\\''`)}'`;
}

export function createTmuxBackend(deps: TmuxBackendDeps): UnitBackend & {
  /** tmux argv prefix (tmux -L <socket>), for tests and attach. */
  tmux(): string[];
} {
  const tmux = () => ['tmux', '-L', deps.socket()];
  const env = { ...deps.env };
  delete env.TMUX;
  delete env.TMUX_PANE;
  const run = async (args: string[], what: string) => {
    const r = await exec([...tmux(), ...args], env);
    if (r.code !== 0)
      throw new SvcError('unavailable', `tmux ${what} failed: ${r.stderr.trim() || `exit ${r.code}`}`);
    return r.stdout;
  };
  const panePid = async (session: string): Promise<number | null> => {
    const r = await exec([...tmux(), 'display-message', '-p', '-t', `=${session}:`, '#{pane_pid}'], env);
    const n = Number.parseInt(r.stdout.trim(), 10);
    return r.code === 0 && Number.isFinite(n) ? n : null;
  };

  const unit = (session: string, pid: number | null): RunningUnit => {
    let stopping: Promise<void> | null = null;
    return {
      backend: 'tmux',
      unit: session,
      pid,
      exited: null,
      stop() {
        stopping ??= (async () => {
          // The pane's process leads its own process group: end the whole tree first, so
          // nothing it forked survives the session.
          const current = (await panePid(session)) ?? pid;
          if (current !== null) await stopGroup(current, deps.stopGraceMs(), deps.waits);
          await exec([...tmux(), 'kill-session', '-t', `=${session}`], env);
        })();
        return stopping;
      },
      async sendKeys(text) {
        if (text !== '')
          await run(['send-keys', '-t', `=${session}:`, '-l', '--', tmuxArg(text)], 'send-keys');
        await run(['send-keys', '-t', `=${session}:`, 'Enter'], 'send-keys');
      },
    };
  };

  return {
    kind: 'tmux',
    tmux,

    async start(l: UnitLaunch) {
      // Values travel in the tmux client's environment, never in argv (which every local user
      // can read in ps): update-environment copies the named variables into the new session.
      // They are then removed from the server's global environment, where they land when
      // this very command started the server.
      const names = agentVarNames(l.env, env);
      const r = await exec(
        [
          ...tmux(),
          'start-server',
          ';',
          'set-option',
          '-g',
          'update-environment',
          names.join(' '),
          ';',
          'new-session',
          '-d',
          '-s',
          l.unit,
          '-x',
          '200',
          '-y',
          '50',
          '-c',
          tmuxArg(l.cwd),
          '--',
          ...l.argv.map(tmuxArg),
          ...names.flatMap((n) => [';', 'set-environment', '-g', '-u', n]),
        ],
        { ...l.env, TMUX: undefined, TMUX_PANE: undefined },
      );
      if (r.code !== 0)
        throw new SvcError('unavailable', `tmux new-session failed: ${r.stderr.trim() || `exit ${r.code}`}`);
      const pipe = [
        ...deps.self,
        'log-pipe',
        l.logFile,
        '--max-bytes',
        String(l.rotation.maxBytes),
        '--keep',
        String(l.rotation.keep),
      ];
      await run(
        ['pipe-pane', '-o', '-t', `=${l.unit}:`, `exec ${pipe.map(shellQuote).join(' ')}`],
        'pipe-pane',
      );
      return unit(l.unit, await panePid(l.unit));
    },

    async probe(units) {
      const r = await exec([...tmux(), 'list-sessions', '-F', '#{session_name}'], env);
      // No server (exit 1, "no server running") simply means no session is alive.
      const live = new Set(r.code === 0 ? r.stdout.split('\n').filter((s) => s !== '') : []);
      return new Map(units.map((u) => [u.unit, live.has(u.unit)]));
    },

    async adopt(l) {
      const r = await exec([...tmux(), 'has-session', '-t', `=${l.unit}`], env);
      if (r.code !== 0) return null;
      return unit(l.unit, await panePid(l.unit));
    },
  };
}
