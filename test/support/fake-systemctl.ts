// Puts the systemctl test double (fake-systemctl.mjs) first on PATH and returns the environment
// that makes svc see a systemd user bus, plus the recorded calls and the units' main pids.
import { chmodSync, existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';

const SCRIPT = resolve(import.meta.dirname, 'fake-systemctl.mjs');

export interface FakeSystemctl {
  /** Merge into the environment of svc: PATH, a bus address, XDG_CONFIG_HOME, the fake's files. */
  env: NodeJS.ProcessEnv;
  /** Each call's arguments, joined by spaces, in order. */
  calls(): string[];
  /** The main pid the fake started for a unit, or null. */
  mainPid(unit: string): number | null;
  /** What the unit's process wrote (its "journal"). */
  journal(unit: string): string;
}

export function installFakeSystemctl(dir: string, basePath: string | undefined): FakeSystemctl {
  const bin = join(dir, 'fake-bin');
  const state = join(dir, 'fake-systemd');
  const log = join(dir, 'systemctl-calls.log');
  mkdirSync(bin, { recursive: true });
  mkdirSync(state, { recursive: true });
  writeFileSync(log, '');
  writeFileSync(join(bin, 'systemctl'), `#!/bin/sh\nexec "${process.execPath}" "${SCRIPT}" "$@"\n`);
  chmodSync(join(bin, 'systemctl'), 0o755);
  return {
    env: {
      PATH: `${bin}:${basePath ?? ''}`,
      // Only ever checked for presence: nothing connects to it.
      DBUS_SESSION_BUS_ADDRESS: `unix:path=${join(dir, 'fake-bus')}`,
      XDG_CONFIG_HOME: join(dir, 'config'),
      FAKE_SYSTEMCTL_LOG: log,
      FAKE_SYSTEMCTL_STATE: state,
    },
    calls: () => readFileSync(log, 'utf8').split('\n').filter(Boolean),
    mainPid(unit) {
      const f = join(state, `${unit}.pid`);
      return existsSync(f) ? Number(readFileSync(f, 'utf8')) : null;
    },
    journal(unit) {
      const f = join(state, `${unit}.journal`);
      return existsSync(f) ? readFileSync(f, 'utf8') : '';
    },
  };
}
