// [supervisor] and [watchdog] tables of config.toml (docs/agents.md, Watchdog).
import { SvcError } from '../../protocol/errors.js';
import type { ConfigSection } from './config.js';
import type { TableReader } from './toml.js';

export const BACKEND_CHOICES = ['auto', 'process', 'systemd'] as const;

export interface SupervisorConfig {
  /** Backend of agents that do not name one: auto = systemd with a user bus, else process. */
  backend: (typeof BACKEND_CHOICES)[number];
  /** SIGTERM → SIGKILL grace when stopping an agent's process group. */
  stopGraceMs: number;
  /**
   * tmux server socket name (tmux -L) of mux_hosted agents; null: one of this SVC_HOME's own
   * (backends/tmux.ts tmuxSocketOf), so two installs on one machine never share sessions.
   */
  tmuxSocket: string | null;
  /** Output log rotation: size of one file, rotated files kept. */
  logMaxBytes: number;
  logKeep: number;
}

/** A local time of day, "HH:MM". */
export interface TimeOfDay {
  hour: number;
  minute: number;
}

export interface WatchdogConfig {
  pollMs: number;
  graceMs: number;
  throttleMs: number;
  /** Default nightly restart for supervised agents (agents.toml may override); null = off. */
  nightlyRestart: TimeOfDay | null;
  /** IANA zone for nightly restarts; null = the daemon's local time (TZ). */
  timezone: string | null;
}

export const supervisorSection: ConfigSection<SupervisorConfig> = {
  parse(t) {
    t?.onlyKeys(['backend', 'stop_grace', 'tmux_socket', 'log_max_bytes', 'log_keep']);
    const tmuxSocket = t?.string('tmux_socket') ?? null;
    if (t && tmuxSocket !== null && !/^[A-Za-z0-9_.-]{1,64}$/.test(tmuxSocket)) {
      throw t.error('tmux_socket', 'use 1-64 letters, digits, "_", "." or "-"');
    }
    return {
      backend: t?.oneOf('backend', BACKEND_CHOICES) ?? 'auto',
      stopGraceMs: t?.duration('stop_grace') ?? 10_000,
      tmuxSocket,
      logMaxBytes: t?.integer('log_max_bytes', 4096) ?? 10 * 1024 * 1024,
      logKeep: t?.integer('log_keep', 0, 100) ?? 3,
    };
  },
};

export const watchdogSection: ConfigSection<WatchdogConfig> = {
  parse(t) {
    t?.onlyKeys(['poll', 'grace', 'throttle', 'nightly_restart', 'timezone']);
    const timezone = t?.string('timezone') ?? null;
    if (t && timezone !== null && !validTimeZone(timezone)) {
      throw t.error('timezone', `unknown time zone "${timezone}" (use an IANA name such as Europe/Berlin)`);
    }
    return {
      pollMs: t?.duration('poll') ?? 60_000,
      graceMs: t?.duration('grace') ?? 90_000,
      throttleMs: t?.duration('throttle') ?? 30 * 60_000,
      nightlyRestart: (t ? readTimeOfDay(t, 'nightly_restart') : null) ?? null,
      timezone,
    };
  },
};

/** "03:30" → {hour: 3, minute: 30}; "off" → null; absent → undefined. */
export function readTimeOfDay(t: TableReader, key: string): TimeOfDay | null | undefined {
  const v = t.string(key);
  if (v === undefined) return undefined;
  try {
    return parseTimeOfDay(v);
  } catch (e) {
    throw t.error(key, (e as Error).message);
  }
}

export function parseTimeOfDay(v: string): TimeOfDay | null {
  if (v === 'off') return null;
  const m = /^([01]\d|2[0-3]):([0-5]\d)$/.exec(v);
  if (!m) throw new SvcError('config_invalid', `must be a local time "HH:MM" (24 h) or "off", got "${v}"`);
  return { hour: Number(m[1]), minute: Number(m[2]) };
}

function validTimeZone(tz: string): boolean {
  try {
    new Intl.DateTimeFormat('en', { timeZone: tz });
    return true;
  } catch {
    return false;
  }
}
