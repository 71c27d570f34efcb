// The life of an agent's unit: launch (with a fresh secrets session), exit, halt, restart,
// re-adoption after a svcd restart, reaping, probing, and what state.db keeps of it. Callers
// hold the agent's queue; deciding when to act is the watchdog's and the operator's.
import { mkdir } from 'node:fs/promises';
import type { Clock } from '../../lib/clock.js';
import { iso } from '../../lib/clock.js';
import type { Logger } from '../../lib/log.js';
import type { SupervisorMetrics } from '../metrics.js';
import type { ExitInfo } from '../process/group.js';
import { reapOrphanGroup } from '../process/group.js';
import { agentEnv } from '../runtimes/env.js';
import { RUNTIMES } from '../runtimes/kinds.js';
import { renderCommand, resolveSelf } from '../runtimes/template.js';
import type { SecretSession, SecretSessions } from '../secrets/sessions.js';
import { type Agent, cwdOf, logFileOf, newAgent } from './agent.js';
import type { AgentSpec, BackendKind } from './agents-file.js';
import type { RunningUnit, UnitBackend, UnitLaunch } from './backends/types.js';
import type { SupervisorSettings } from './config-section.js';
import type { SupervisorEvents } from './events.js';
import type { AgentRow, SupervisorStore } from './store.js';

export interface LifecycleDeps {
  clock: Clock;
  /** Real-time waits for process exits (the system clock, even when `clock` is fake). */
  waits: Clock;
  log: Logger;
  store: SupervisorStore;
  sessions: SecretSessions;
  events: SupervisorEvents;
  paths: { home: string; logsDir: string };
  /** svcd's environment, the base of every agent's (credentials stripped by agentEnv). */
  env: NodeJS.ProcessEnv;
  /** How "svcd" in templates is run. */
  self: string[];
  settings: () => SupervisorSettings;
  backends: Record<BackendKind, UnitBackend>;
  metrics?: Pick<SupervisorMetrics, 'restarts'>;
}

export interface UnitLifecycle {
  /** Starts the agent's unit. Failure leaves it dead, recorded, and is rethrown. */
  launch(a: Agent): Promise<void>;
  /** Stops the agent's unit, whatever it left running. */
  halt(a: Agent): Promise<void>;
  /** halt + launch, counted and recorded; `event` is the matrix event it publishes. */
  restartNow(a: Agent, reason: string, event: 'agent.restarted' | 'agent.nightly_restart'): Promise<void>;
  /** At svcd start: re-adopt the agent's unit, or reap its orphan and start it if desired. */
  bringUp(a: Agent, previousPid: number | null): Promise<void>;
  /** At svcd start: stops what a previous svcd left running for an agent no longer listed. */
  reapRemoved(id: string, row: AgentRow): Promise<void>;
  /** Asks the backends which units are alive now; marks the dead ones. */
  probe(list: Agent[]): Promise<Map<Agent, boolean>>;
  /** Saves what state.db keeps of the agent (paused, unit, pid, restarts). */
  persist(a: Agent): Promise<void>;
  /** Adds an entry to the agent's history (svc agent supervise status). */
  remember(a: Agent, action: string, reason: string): Promise<void>;
}

export function createUnitLifecycle(deps: LifecycleDeps): UnitLifecycle {
  const { clock, log, store, sessions, events } = deps;

  function rotation() {
    const s = deps.settings().supervisor;
    return { maxBytes: s.logMaxBytes, keep: s.logKeep };
  }

  function launchOf(a: Agent, session: SecretSession | null): UnitLaunch {
    const c = deps.settings();
    const spec = a.spec;
    const cwd = cwdOf(spec, deps.paths.home);
    const template = spec.command ?? c.runtime[spec.runtime].command;
    const rendered = renderCommand(template, { prompt: spec.prompt, task_id: '', workdir: cwd });
    const protocol = RUNTIMES[spec.runtime].protocol;
    return {
      agentId: spec.id,
      unit: a.unitName,
      argv: resolveSelf(rendered.argv, deps.self),
      cwd,
      env: agentEnv({
        base: deps.env,
        extra: [c.runtime[spec.runtime].env, spec.env],
        agentId: spec.id,
        unit: a.unitName,
        session: session ? session.env : {},
      }),
      logFile: logFileOf(spec, deps.paths.logsDir),
      rotation: rotation(),
      mode: protocol === 'acp' ? 'acp' : spec.pty ? 'pty' : 'plain',
      onProgress: (u) => events.progress(a, u, null),
      description: spec.runtime,
    };
  }

  async function persist(a: Agent): Promise<void> {
    await store.save(a.spec.id, {
      paused: a.paused,
      backend: a.backend.kind,
      unit: a.unitName,
      pid: a.unit?.pid ?? null,
      restarts: a.restarts,
    });
  }

  async function remember(a: Agent, action: string, reason: string): Promise<void> {
    await store.addHistory(a.spec.id, { at: iso(clock.now()), action, reason });
  }

  async function launch(a: Agent): Promise<void> {
    await mkdir(cwdOf(a.spec, deps.paths.home), { recursive: true, mode: 0o700 });
    const session = sessions.mint(a.spec.id);
    const generation = ++a.generation;
    a.state = 'starting';
    let unit: RunningUnit;
    try {
      unit = await a.backend.start(launchOf(a, session));
    } catch (e) {
      session.revoke();
      a.state = 'dead';
      a.lastExit = { at: clock.now(), code: null, signal: null };
      await remember(a, 'start_failed', (e as Error).message);
      log.warn({ agent: a.spec.id, err: (e as Error).message }, 'agent failed to start');
      throw e;
    }
    a.unit = unit;
    a.session = session;
    a.state = 'running';
    a.startedAt = clock.now();
    await persist(a);
    log.info({ agent: a.spec.id, backend: a.backend.kind, pid: unit.pid }, 'agent started');
    if (unit.terminal) events.terminal(a, unit.terminal);
    unit.exited?.then((e) => onExit(a, generation, e));
  }

  function onExit(a: Agent, generation: number, e: ExitInfo): void {
    if (a.generation !== generation || a.state === 'stopping' || a.state === 'stopped') return;
    a.state = 'dead';
    a.lastExit = { at: clock.now(), code: e.code, signal: e.signal };
    a.session?.revoke();
    a.session = null;
    if (a.unit?.terminal) events.terminal(a, null);
    log.warn({ agent: a.spec.id, code: e.code, signal: e.signal }, 'agent exited');
  }

  async function halt(a: Agent): Promise<void> {
    const unit = a.unit;
    a.generation++;
    a.state = 'stopping';
    try {
      if (unit) await unit.stop();
    } finally {
      if (unit?.terminal) events.terminal(a, null);
      a.session?.revoke();
      a.session = null;
      a.unit = null;
      a.state = 'stopped';
      await persist(a);
    }
  }

  return {
    launch,
    halt,
    persist,
    remember,

    async restartNow(a, reason, event) {
      await halt(a);
      a.restarts++;
      a.lastRestartAt = clock.now();
      a.lastRestartReason = reason;
      const cause =
        event === 'agent.nightly_restart' ? 'nightly' : reason === 'manual' ? 'manual' : 'watchdog';
      deps.metrics?.restarts.inc({ agent: a.spec.id, cause });
      a.gaveUpUntil = null;
      await remember(a, event === 'agent.nightly_restart' ? 'nightly_restart' : 'restart', reason);
      try {
        await launch(a);
      } finally {
        await persist(a);
        await events.matrix(a, event, reason, { pid: a.unit?.pid ?? null, started: a.state === 'running' });
      }
    },

    async bringUp(a, previousPid) {
      const adopted = await a.backend.adopt(launchOf(a, null), previousPid);
      if (adopted) {
        a.unit = adopted;
        a.state = 'running';
        a.startedAt = clock.now();
        a.generation++;
        await persist(a);
        await remember(a, 'adopted', `${a.backend.kind} unit ${a.unitName} survived the svcd restart`);
        log.info({ agent: a.spec.id, backend: a.backend.kind, pid: adopted.pid }, 'agent re-adopted');
        if (!a.spec.supervise) a.desired = 'running';
        return;
      }
      if (a.desired === 'running') await launch(a).catch(() => {});
      else await persist(a);
    },

    async reapRemoved(id, row) {
      if (!row.unit) return;
      if (row.backend === 'process' && row.pid !== null) {
        await reapOrphanGroup(row.pid, row.unit, deps.settings().supervisor.stopGraceMs, deps.waits);
      } else if (row.backend === 'tmux' || row.backend === 'systemd') {
        const probe: AgentSpec = {
          id,
          runtime: row.backend === 'tmux' ? 'mux_hosted' : 'alpha_code',
          command: null,
          cwd: null,
          env: {},
          supervise: false,
          nightlyRestart: null,
          pty: false,
          backend: row.backend,
          profile: null,
          session: row.backend === 'tmux' ? row.unit : null,
          prompt: '',
        };
        const a = newAgent(probe, {
          backend: deps.backends[row.backend],
          fingerprint: '',
          nextNightlyAt: null,
        });
        a.unitName = row.unit.replace(/\.service$/, '');
        const unit = await a.backend.adopt(launchOf(a, null), row.pid);
        await unit?.stop();
      }
      await store.remove(id);
    },

    async probe(list) {
      const out = new Map<Agent, boolean>();
      const byBackend = new Map<UnitBackend, Agent[]>();
      for (const a of list) {
        if (!a.unit || a.state !== 'running') {
          out.set(a, false);
          continue;
        }
        byBackend.set(a.backend, [...(byBackend.get(a.backend) ?? []), a]);
      }
      await Promise.all(
        [...byBackend].map(async ([backend, group]) => {
          const alive = await backend.probe(group.map((a) => a.unit as RunningUnit));
          for (const a of group) out.set(a, alive.get(a.unitName) ?? false);
        }),
      );
      const now = clock.now();
      for (const [a, alive] of out) {
        a.checkedAt = now;
        if (!alive && a.state === 'running') {
          // Polled backends (tmux, systemd) learn of a death only here.
          a.state = 'dead';
          a.lastExit ??= { at: now, code: null, signal: null };
          a.session?.revoke();
          a.session = null;
        }
      }
      return out;
    },
  };
}
