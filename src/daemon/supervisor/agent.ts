// One supervised agent's record (spec, backend, unit, what the watchdog and the operator did)
// and its operation queue, with pure helpers: backend choice, fingerprint, nightly time and
// the status view. Other supervisor modules mutate a record only inside exclusive().
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { iso } from '../../lib/clock.js';
import type { AgentStatus, UnitState } from '../../protocol/agents.js';
import { RUNTIMES } from '../runtimes/kinds.js';
import type { SecretSession } from '../secrets/sessions.js';
import type { AgentSpec, BackendKind } from './agents-file.js';
import type { RunningUnit, UnitBackend } from './backends/types.js';
import type { SupervisorSettings } from './config-section.js';
import { nextNightly } from './nightly.js';
import { sampleUsage, type UsageState } from './usage.js';
import { freshWatch, type WatchState } from './watchdog.js';

export interface Agent {
  spec: AgentSpec;
  /** spec + effective template + backend: a change means the agent must restart on reload. */
  fingerprint: string;
  backend: UnitBackend;
  unitName: string;
  unit: RunningUnit | null;
  session: SecretSession | null;
  state: UnitState;
  desired: 'running' | 'stopped';
  paused: boolean;
  watch: WatchState;
  /** The last CPU reading of its process (usage.ts). */
  usage?: UsageState | null;
  startedAt: number | null;
  restarts: number;
  lastRestartAt: number | null;
  lastRestartReason: string | null;
  gaveUpUntil: number | null;
  lastExit: { at: number; code: number | null; signal: string | null } | null;
  checkedAt: number | null;
  /** Bumped at each launch, so a late exit of an old unit is ignored. */
  generation: number;
  /** Serializes operations on this agent. */
  queue: Promise<unknown>;
}

/** What state.db remembers of an agent across svcd restarts (supervisor/store.ts). */
export interface RememberedAgent {
  paused: boolean;
  restarts: number;
}

export function unitNameOf(spec: AgentSpec): string {
  return spec.runtime === 'mux_hosted' ? (spec.session ?? spec.id) : `svc-agent-${spec.id}`;
}

export function hasUserBus(env: NodeJS.ProcessEnv): boolean {
  if (env.DBUS_SESSION_BUS_ADDRESS) return true;
  return Boolean(env.XDG_RUNTIME_DIR && existsSync(join(env.XDG_RUNTIME_DIR, 'bus')));
}

export function chooseBackend(spec: AgentSpec, config: SupervisorSettings, userBus: boolean): BackendKind {
  if (spec.backend) return spec.backend;
  if (spec.runtime === 'mux_hosted') return 'tmux';
  if (RUNTIMES[spec.runtime].protocol === 'acp' || spec.pty) return 'process';
  const b = config.supervisor.backend;
  if (b === 'auto') return userBus ? 'systemd' : 'process';
  return b;
}

export function fingerprintOf(spec: AgentSpec, c: SupervisorSettings, userBus: boolean): string {
  return JSON.stringify({
    spec,
    template: c.runtime[spec.runtime],
    backend: chooseBackend(spec, c, userBus),
  });
}

/** The agent's next nightly restart after `from` (its own time, else [watchdog]'s), or null. */
export function nightlyOf(spec: AgentSpec, c: SupervisorSettings, from: number): number | null {
  const w = c.watchdog;
  const tod = spec.nightlyRestart === undefined ? w.nightlyRestart : spec.nightlyRestart;
  return tod ? nextNightly(from, tod, w.timezone) : null;
}

/** A fresh record: nothing running yet, paused and restart count as state.db remembers them. */
export function newAgent(
  spec: AgentSpec,
  on: { backend: UnitBackend; fingerprint: string; nextNightlyAt: number | null },
  remembered?: RememberedAgent,
): Agent {
  return {
    spec,
    fingerprint: on.fingerprint,
    backend: on.backend,
    unitName: unitNameOf(spec),
    unit: null,
    session: null,
    state: 'stopped',
    desired: spec.supervise ? 'running' : 'stopped',
    paused: remembered?.paused ?? false,
    watch: freshWatch(on.nextNightlyAt),
    startedAt: null,
    restarts: remembered?.restarts ?? 0,
    lastRestartAt: null,
    lastRestartReason: null,
    gaveUpUntil: null,
    lastExit: null,
    checkedAt: null,
    generation: 0,
    queue: Promise.resolve(),
  };
}

/** Runs fn after every earlier operation on this agent (failures do not block the queue). */
export function exclusive<T>(a: Agent, fn: () => Promise<T>): Promise<T> {
  const p = a.queue.then(fn, fn);
  a.queue = p.catch(() => {});
  return p;
}

export function cwdOf(spec: AgentSpec, home: string): string {
  return spec.cwd ?? join(home, 'agents', spec.id);
}

export function logFileOf(spec: AgentSpec, logsDir: string): string {
  return join(logsDir, `${spec.id}.log`);
}

/** The agent as agent.list and agent.status show it (src/protocol/agents.ts). */
export function statusOf(
  a: Agent,
  where: { logsDir: string; tmuxSocket: string; now?: number },
): AgentStatus {
  const kind = a.backend.kind;
  const pid = a.state === 'running' ? (a.unit?.pid ?? null) : null;
  let usage: AgentStatus['usage'] = null;
  if (where.now !== undefined) {
    const s = sampleUsage(pid, where.now, a.usage ?? null);
    a.usage = s.state;
    usage = s.usage;
  }
  return {
    id: a.spec.id,
    runtime: a.spec.runtime,
    backend: kind,
    unit: kind === 'systemd' ? `${a.unitName}.service` : a.unitName,
    profile: a.spec.profile,
    supervise: a.spec.supervise,
    paused: a.paused,
    pty: a.spec.pty,
    state: a.state,
    pid,
    started_at: a.startedAt === null ? null : iso(a.startedAt),
    restarts: a.restarts,
    last_restart_at: a.lastRestartAt === null ? null : iso(a.lastRestartAt),
    last_restart_reason: a.lastRestartReason,
    gave_up_until: a.gaveUpUntil === null ? null : iso(a.gaveUpUntil),
    next_nightly_restart_at: a.watch.nextNightlyAt === null ? null : iso(a.watch.nextNightlyAt),
    last_exit:
      a.lastExit === null
        ? null
        : { at: iso(a.lastExit.at), code: a.lastExit.code, signal: a.lastExit.signal },
    checked_at: a.checkedAt === null ? null : iso(a.checkedAt),
    log_file: kind === 'systemd' ? null : logFileOf(a.spec, where.logsDir),
    tmux: kind === 'tmux' ? { socket: where.tmuxSocket, session: a.unitName } : null,
    usage,
  };
}
