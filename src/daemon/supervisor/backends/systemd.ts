// The systemd backend: one user unit per agent (svc-agent-<id>.service) driven with
// `systemctl --user`. The unit file is written to $XDG_RUNTIME_DIR/systemd/user (a tmpfs
// that systemd searches for runtime units), so the per-run secrets session id it carries
// never reaches a disk and vanishes at logout. systemd kills the unit's whole cgroup on
// stop (KillMode=control-group); output goes to the journal (journalctl --user -u <unit>).
import { mkdir, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { SvcError } from '../../../protocol/errors.js';
import { exec } from '../../process/exec.js';
import type { RunningUnit, UnitBackend, UnitLaunch } from './types.js';

export interface SystemdBackendDeps {
  /** Environment systemctl runs with (PATH, XDG_RUNTIME_DIR, DBUS_SESSION_BUS_ADDRESS). */
  env: NodeJS.ProcessEnv;
  stopGraceMs: () => number;
}

export function unitFileName(unit: string): string {
  return `${unit}.service`;
}

/** Where runtime user units live: $XDG_RUNTIME_DIR/systemd/user, else ~/.config/systemd/user. */
export function userUnitDir(env: NodeJS.ProcessEnv): string {
  if (env.XDG_RUNTIME_DIR) return join(env.XDG_RUNTIME_DIR, 'systemd', 'user');
  return join(env.HOME ?? '/', '.config', 'systemd', 'user');
}

/** Quotes a word for systemd unit files: "…" with \ and " escaped, $ and % doubled. */
export function systemdQuote(s: string): string {
  return `"${s.replace(/\\/g, '\\\\').replace(/"/g, '\\"').replace(/\n/g, '\\n').replace(/\$/g, '$$$$').replace(/%/g, '%%')}"`;
}

export function renderUnitFile(l: UnitLaunch, stopGraceMs: number): string {
  const lines = [
    '# Written by svcd for agents.toml; changes here are overwritten at the next start.',
    '[Unit]',
    `Description=svc agent ${l.agentId} (${l.description})`,
    '',
    '[Service]',
    'Type=simple',
    `ExecStart=${l.argv.map(systemdQuote).join(' ')}`,
    `WorkingDirectory=${systemdQuote(l.cwd)}`,
    ...Object.entries(l.env)
      .filter((e): e is [string, string] => e[1] !== undefined)
      .map(([k, v]) => `Environment=${systemdQuote(`${k}=${v}`)}`),
    // svcd's watchdog decides about restarts (grace, throttle), not systemd.
    'Restart=no',
    'KillMode=control-group',
    `TimeoutStopSec=${Math.max(1, Math.ceil(stopGraceMs / 1000))}`,
    '',
  ];
  return lines.join('\n');
}

export function createSystemdBackend(deps: SystemdBackendDeps): UnitBackend {
  const systemctl = async (args: string[], what: string) => {
    const r = await exec(['systemctl', '--user', ...args], deps.env);
    if (r.code !== 0) {
      throw new SvcError(
        'unavailable',
        `systemctl --user ${what} failed: ${r.stderr.trim() || `exit ${r.code}`}`,
      );
    }
    return r.stdout;
  };
  const mainPid = async (unit: string): Promise<number | null> => {
    const r = await exec(
      ['systemctl', '--user', 'show', '-p', 'MainPID', '--value', unitFileName(unit)],
      deps.env,
    );
    const n = Number.parseInt(r.stdout.trim(), 10);
    return r.code === 0 && n > 0 ? n : null;
  };
  const unit = (name: string, pid: number | null): RunningUnit => {
    let stopping: Promise<void> | null = null;
    return {
      backend: 'systemd',
      unit: name,
      pid,
      exited: null,
      stop() {
        stopping ??= (async () => {
          await systemctl(['stop', unitFileName(name)], `stop ${unitFileName(name)}`);
          await rm(join(userUnitDir(deps.env), unitFileName(name)), { force: true });
        })();
        return stopping;
      },
    };
  };
  return {
    kind: 'systemd',

    async start(l) {
      const dir = userUnitDir(deps.env);
      await mkdir(dir, { recursive: true, mode: 0o700 });
      await writeFile(join(dir, unitFileName(l.unit)), renderUnitFile(l, deps.stopGraceMs()), {
        mode: 0o600,
      });
      await systemctl(['daemon-reload'], 'daemon-reload');
      // restart, not start: it also replaces a unit that is still running (manual restart).
      await systemctl(['restart', unitFileName(l.unit)], `restart ${unitFileName(l.unit)}`);
      return unit(l.unit, await mainPid(l.unit));
    },

    async probe(units) {
      if (units.length === 0) return new Map();
      // One call for all units: is-active prints one state per unit, in order (exit code is
      // non-zero as soon as one is inactive, so it is not an error here).
      const r = await exec(
        ['systemctl', '--user', 'is-active', ...units.map((u) => unitFileName(u.unit))],
        deps.env,
      );
      const states = r.stdout.split('\n');
      return new Map(
        units.map((u, i) => [
          u.unit,
          ['active', 'activating', 'reloading'].includes(states[i]?.trim() ?? ''),
        ]),
      );
    },

    async adopt(l) {
      const r = await exec(['systemctl', '--user', 'is-active', unitFileName(l.unit)], deps.env);
      if (r.stdout.trim() !== 'active' && r.stdout.trim() !== 'activating') return null;
      return unit(l.unit, await mainPid(l.unit));
    },
  };
}
