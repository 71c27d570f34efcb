// The supervisor component: starts the agents of agents.toml on their unit backends,
// re-adopts what survived a svcd restart, runs the watchdog loop (the decision itself is
// watchdog.ts), and carries out start/stop/restart/pause/resume/signal and reload. Its parts
// are built here with their dependencies passed in: the agent records and their table
// (agent.ts, agent-table.ts), event publishing (events.ts), the unit lifecycle and the
// watchdog loop (below, each a factory of its own). Operations on one agent are serialized (exclusive()),
// so the watchdog and an operator never race on the same unit. mgmt.sock: methods.ts.
import { mkdir } from 'node:fs/promises';
import { type Clock, iso, systemClock, type TimerHandle } from '../../lib/clock.js';
import type { Logger } from '../../lib/log.js';
import type { AgentStatus, ReloadResult, SignalResult } from '../../protocol/agents.js';
import type { Component } from '../component.js';
import type { DaemonPaths } from '../paths.js';
import { reapOrphanGroup } from '../process/group.js';
import type { ExitInfo } from '../runtimes/acp-session.js';
import { agentEnv, withoutCredentials } from '../runtimes/env.js';
import { RUNTIMES } from '../runtimes/kinds.js';
import { createRuntimeRunner, type RuntimeRunner } from '../runtimes/runner.js';
import { renderCommand, resolveSelf, selfCommand } from '../runtimes/template.js';
import type { SecretSession, SecretSessions } from '../secrets/sessions.js';
import type { StateStore } from '../state/store.js';
import type { EventOutbox } from '../tower-client/outbox.js';
import {
  type Agent,
  chooseBackend,
  cwdOf,
  exclusive,
  fingerprintOf,
  hasUserBus,
  logFileOf,
  newAgent,
  nightlyOf,
  type RememberedAgent,
  statusOf,
} from './agent.js';
import { AgentTable, planReload } from './agent-table.js';
import { type AgentSpec, type BackendKind, loadAgentsFile } from './agents-file.js';
import { createProcessBackend } from './backends/process.js';
import { createSystemdBackend } from './backends/systemd.js';
import { createTmuxBackend } from './backends/tmux.js';
import type { RunningUnit, UnitBackend, UnitLaunch } from './backends/types.js';
import type { SupervisorSettings } from './config-section.js';
import { createSupervisorEvents, type SupervisorEvents } from './events.js';
import { deliverSignal } from './signal.js';
import { type AgentRow, createSupervisorStore, type SupervisorStore } from './store.js';
import type { AgentTerminal } from './terminal.js';
import { afterManualRestart, type Decision, freshWatch, step } from './watchdog.js';

/** What the supervisor uses of svcd (daemon.ts passes its DaemonContext). */
export interface SupervisorContext {
  clock: Clock;
  log: Logger;
  paths: Pick<DaemonPaths, 'home' | 'logsDir' | 'agentsToml'>;
  /** svcd's environment: the base of agents' environments, and the systemd user bus. */
  env: NodeJS.ProcessEnv;
  state: StateStore;
  events: EventOutbox;
  identity: { node_id: string };
  /** Mints the SVC_SECRETS_* session of every agent run (the broker's). */
  secrets: SecretSessions;
}

export interface SupervisorDeps {
  /** Its sections of config.toml, as read at svcd start. */
  config: SupervisorSettings;
  /**
   * Reads them again for agent.reload; throws config_invalid (file, line, field) on an invalid
   * file, which then changes nothing. Default: reload keeps `config`.
   */
  reloadConfig?: () => Promise<SupervisorSettings>;
  /** Mints secrets sessions instead of ctx.secrets (tests). */
  sessions?: SecretSessions;
  /** Real-time waits for process exits (default: the system clock, even when ctx.clock is fake). */
  waits?: Clock;
  /** How "svcd" in templates is run (default: this install). */
  self?: string[];
  /** Whether a systemd user bus exists (default: detected from the environment). */
  userBus?: boolean;
}

export interface SignalOptions {
  /** Wait for the turn or run to finish and return its outcome. */
  wait?: boolean;
}

export interface Supervisor extends Component {
  /**
   * Delivers a prompt to an agent (by id, profile, or mux session name): ACP → a prompt on its
   * session; mux_hosted → typed into the pane + Enter; PTY agents → typed into the terminal;
   * CLI kinds → a new one-shot run. Resolves when delivered (or finished, with wait).
   * Errors: agent_not_found, agent_not_running (ACP, mux_hosted and PTY agents must be up).
   */
  signal(agentIdOrProfile: string, prompt?: string, opts?: SignalOptions): Promise<SignalResult>;
  listAgents(): AgentStatus[];
  /** Probes the unit now; includes the recent history. */
  agentStatus(id: string): Promise<AgentStatus>;
  startAgent(id: string): Promise<AgentStatus>;
  stopAgent(id: string): Promise<AgentStatus>;
  restartAgent(id: string): Promise<AgentStatus>;
  pauseAgent(id: string): Promise<AgentStatus>;
  resumeAgent(id: string): Promise<AgentStatus>;
  /** Re-reads agents.toml and config.toml; an invalid file changes nothing (config_invalid). */
  reload(): Promise<ReloadResult>;
  /** One watchdog poll now (what the timer does every poll interval). */
  poll(): Promise<void>;
  /** The terminal of a running PTY agent, for the attach gateway. */
  terminal(agentId: string): AgentTerminal | null;
  /** Told when a PTY agent's terminal appears (start, restart) or goes (null). */
  onTerminal(listener: (agentId: string, terminal: AgentTerminal | null) => void): () => void;
  /** One-shot runs of any runtime kind (the task worker's subagents use the same runner). */
  readonly runtimes: RuntimeRunner;
}

export function createSupervisor(ctx: SupervisorContext, deps: SupervisorDeps): Supervisor {
  const log = ctx.log.child({ component: 'supervisor' });
  const { clock, paths } = ctx;
  const waits = deps.waits ?? systemClock;
  const self = deps.self ?? selfCommand();
  const userBus = deps.userBus ?? hasUserBus(ctx.env);
  const sessions = deps.sessions ?? ctx.secrets;
  const store = createSupervisorStore(ctx.state);
  /** The sections in force: replaced by a valid reload only. */
  let settings = deps.config;
  const current = () => settings;
  const stopGraceMs = () => settings.supervisor.stopGraceMs;
  const backends: Record<BackendKind, UnitBackend> = {
    process: createProcessBackend({ clock, waits, stopGraceMs }),
    tmux: createTmuxBackend({
      socket: () => settings.supervisor.tmuxSocket,
      env: withoutCredentials(ctx.env),
      waits,
      stopGraceMs,
      self,
    }),
    systemd: createSystemdBackend({ env: ctx.env, stopGraceMs }),
  };
  const table = new AgentTable(paths.agentsToml);
  const events = createSupervisorEvents({ outbox: ctx.events, nodeId: ctx.identity.node_id, clock, log });
  const lifecycle = createUnitLifecycle({
    clock,
    waits,
    log,
    store,
    sessions,
    events,
    paths,
    env: ctx.env,
    self,
    settings: current,
    backends,
  });
  const watchdog = createWatchdogLoop({ clock, log, table, lifecycle, events, settings: current });
  /** One-shot runs and ACP turns started by signals without wait: aborted and awaited at stop. */
  const background = new Map<Promise<unknown>, AbortController>();
  /** The runner of the templates in force; made on first use, dropped by a reload. */
  let runner: RuntimeRunner | null = null;
  const runtimes: RuntimeRunner = {
    run: (req) => {
      runner ??= createRuntimeRunner({
        runtimes: settings.runtime,
        sessions,
        logsDir: paths.logsDir,
        baseEnv: ctx.env,
        clock,
        waits,
        stopGraceMs: stopGraceMs(),
        rotation: { maxBytes: settings.supervisor.logMaxBytes, keep: settings.supervisor.logKeep },
        self,
      });
      return runner.run(req);
    },
  };
  let stopped = false;

  function recordOf(spec: AgentSpec, c: SupervisorSettings, remembered?: RememberedAgent): Agent {
    return newAgent(
      spec,
      {
        backend: backends[chooseBackend(spec, c, userBus)],
        fingerprint: fingerprintOf(spec, c, userBus),
        nextNightlyAt: nightlyOf(spec, c, clock.now()),
      },
      remembered,
    );
  }

  const view = (a: Agent) =>
    statusOf(a, { logsDir: paths.logsDir, tmuxSocket: settings.supervisor.tmuxSocket });

  /** Runs `op` on the agent's queue and answers its status afterwards. */
  async function operate(id: string, op: (a: Agent) => Promise<void>): Promise<AgentStatus> {
    const a = table.find(id);
    await exclusive(a, () => op(a));
    return view(a);
  }

  async function reload(): Promise<ReloadResult> {
    // Parse everything first (config.toml, then agents.toml): an invalid file throws here
    // and nothing changes.
    const next = deps.reloadConfig ? await deps.reloadConfig() : settings;
    const specs = await loadAgentsFile(paths.agentsToml);
    const before = settings;
    settings = next;
    runner = null;
    const result = planReload(
      new Map(table.all().map((a) => [a.spec.id, a.fingerprint])),
      specs.map((s) => ({ id: s.id, fingerprint: fingerprintOf(s, next, userBus) })),
    );
    const work: Promise<unknown>[] = [];
    for (const id of result.removed) {
      const a = table.find(id);
      table.delete(id);
      work.push(
        exclusive(a, async () => {
          await lifecycle.halt(a);
          await store.remove(id);
        }),
      );
    }
    const unchanged = new Set(result.unchanged);
    const watchdogChanged = JSON.stringify(before.watchdog) !== JSON.stringify(next.watchdog);
    for (const spec of specs) {
      const old = table.get(spec.id);
      if (!old) {
        const a = recordOf(spec, next);
        table.set(a);
        work.push(
          exclusive(a, async () =>
            a.desired === 'running' ? lifecycle.launch(a) : lifecycle.persist(a),
          ).catch(() => {}),
        );
      } else if (unchanged.has(spec.id)) {
        if (watchdogChanged) old.watch = { ...old.watch, nextNightlyAt: nightlyOf(spec, next, clock.now()) };
      } else {
        const a = recordOf(spec, next, { paused: old.paused, restarts: old.restarts });
        table.set(a);
        work.push(
          exclusive(old, () => lifecycle.halt(old))
            .then(() =>
              exclusive(a, async () => {
                await lifecycle.remember(a, 'reload', 'agents.toml or config.toml changed');
                if (a.desired === 'running') await lifecycle.launch(a);
                else await lifecycle.persist(a);
              }),
            )
            .catch(() => {}),
        );
      }
    }
    await Promise.all(work);
    if (before.watchdog.pollMs !== next.watchdog.pollMs) watchdog.reschedule();
    log.info(result, 'agents reloaded');
    return result;
  }

  return {
    name: 'supervisor',
    runtimes,

    async start() {
      stopped = false;
      await store.migrate();
      const specs = await loadAgentsFile(paths.agentsToml);
      const rows = await store.all();
      for (const spec of specs) table.set(recordOf(spec, settings, rows.get(spec.id)));
      for (const [id, row] of rows) {
        if (!table.has(id))
          await lifecycle
            .reapRemoved(id, row)
            .catch((e: unknown) => log.warn({ err: e, agent: id }, 'cannot reap'));
      }
      await Promise.all(
        table.all().map((a) => exclusive(a, () => lifecycle.bringUp(a, rows.get(a.spec.id)?.pid ?? null))),
      );
      log.info({ agents: table.size }, 'supervisor started');
      watchdog.start();
    },

    async stop() {
      if (stopped) return;
      stopped = true;
      await watchdog.stop();
      for (const abort of background.values()) abort.abort();
      await Promise.allSettled([...background.keys()]);
      // svcd owns process units: they end with it. tmux sessions and systemd units live on
      // and are re-adopted by the next svcd.
      await Promise.all(
        table.all().map((a) =>
          exclusive(a, async () => {
            if (a.unit && a.backend.kind === 'process') await lifecycle.halt(a);
          }),
        ),
      );
    },

    status() {
      const states: Record<string, number> = {};
      for (const a of table.all()) states[a.state] = (states[a.state] ?? 0) + 1;
      return { agents: table.size, ...states };
    },

    listAgents() {
      // Code-point order: ids are ASCII, and localeCompare would page in ICU's collation data
      // (≈2 MiB of resident memory for the rest of the daemon's life).
      return table
        .all()
        .map(view)
        .sort((x, y) => (x.id < y.id ? -1 : x.id > y.id ? 1 : 0));
    },

    async agentStatus(id) {
      const a = table.find(id);
      await exclusive(a, async () => {
        await lifecycle.probe([a]);
      });
      return { ...view(a), history: await store.history(a.spec.id) };
    },

    startAgent: (id) =>
      operate(id, async (a) => {
        a.desired = 'running';
        if (a.state === 'running') return;
        if (a.unit) await lifecycle.halt(a); // a dead unit: clear what it left behind
        a.watch = freshWatch(a.watch.nextNightlyAt);
        a.gaveUpUntil = null;
        await lifecycle.remember(a, 'start', 'operator');
        await lifecycle.launch(a);
      }),

    stopAgent: (id) =>
      operate(id, async (a) => {
        a.desired = 'stopped';
        await lifecycle.halt(a);
        await lifecycle.remember(a, 'stop', 'operator');
      }),

    restartAgent: (id) =>
      operate(id, async (a) => {
        a.desired = 'running';
        a.watch = afterManualRestart(a.watch, clock.now());
        await lifecycle.restartNow(a, 'manual', 'agent.restarted');
      }),

    pauseAgent: (id) =>
      operate(id, async (a) => {
        a.paused = true;
        await lifecycle.persist(a);
        await lifecycle.remember(a, 'pause', 'operator');
      }),

    resumeAgent: (id) =>
      operate(id, async (a) => {
        a.paused = false;
        // Resuming also lifts a give-up: the operator asks for auto-restart now.
        a.watch = freshWatch(a.watch.nextNightlyAt);
        a.gaveUpUntil = null;
        await lifecycle.persist(a);
        await lifecycle.remember(a, 'resume', 'operator');
      }),

    reload,

    poll: () => watchdog.poll(),

    terminal(agentId) {
      const a = table.get(agentId);
      return a?.state === 'running' ? (a.unit?.terminal ?? null) : null;
    },

    onTerminal: (listener) => events.onTerminal(listener),

    async signal(target, prompt, opts = {}) {
      const a = table.find(target);
      const cwd = cwdOf(a.spec, paths.home);
      await mkdir(cwd, { recursive: true, mode: 0o700 });
      return deliverSignal(
        {
          agentId: a.spec.id,
          spec: a.spec,
          running: a.state === 'running' ? a.unit : null,
          cwd,
          logFile: logFileOf(a.spec, paths.logsDir),
          clock,
          runtimes,
          publishProgress: (u, runId) => events.progress(a, u, runId),
          track: (p, abort) => {
            background.set(p, abort);
            p.finally(() => background.delete(p)).catch(() => {});
          },
          log,
        },
        prompt ?? a.spec.prompt,
        opts,
      );
    },
  };
}

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

export interface WatchdogLoopDeps {
  clock: Clock;
  log: Logger;
  table: AgentTable;
  lifecycle: UnitLifecycle;
  events: SupervisorEvents;
  settings: () => SupervisorSettings;
}

export interface WatchdogLoop {
  /** Schedules the first poll, one poll interval from now. */
  start(): void;
  /** One poll now (what the timer does every poll interval). */
  poll(): Promise<void>;
  /** The poll interval changed (reload): the next poll is one new interval from now. */
  reschedule(): void;
  stop(): Promise<void>;
}

export function createWatchdogLoop(deps: WatchdogLoopDeps): WatchdogLoop {
  const { clock, log, table, lifecycle, events } = deps;
  let timer: TimerHandle | null = null;
  let polling: Promise<void> | null = null;
  let stopped = false;

  async function act(a: Agent, decision: Decision): Promise<void> {
    switch (decision.action) {
      case 'none':
        return;
      case 'restart':
        log.warn({ agent: a.spec.id, reason: decision.reason }, 'watchdog restarts dead agent');
        await lifecycle.restartNow(
          a,
          decision.reason === 'retry' ? 'dead (retry after throttle)' : 'dead',
          'agent.restarted',
        );
        return;
      case 'nightly_restart':
        log.info({ agent: a.spec.id }, 'nightly restart');
        await lifecycle.restartNow(a, 'nightly', 'agent.nightly_restart');
        return;
      case 'give_up':
        a.gaveUpUntil = decision.retryAt;
        log.error(
          { agent: a.spec.id, retry_at: iso(decision.retryAt) },
          'agent died again after restart; giving up until retry',
        );
        await lifecycle.remember(
          a,
          'give_up',
          `dead again after restart; next attempt at ${iso(decision.retryAt)}`,
        );
        await events.matrix(a, 'agent.gave_up', 'dead again after restart', {
          retry_at: iso(decision.retryAt),
        });
        return;
    }
  }

  async function pollOnce(): Promise<void> {
    const list = table.all();
    const alive = await lifecycle.probe(list);
    const w = deps.settings().watchdog;
    await Promise.all(
      list.map((a) =>
        exclusive(a, async () => {
          if (!table.holds(a)) return; // replaced by a reload meanwhile
          const now = clock.now();
          const isAlive = a.state === 'running' && (alive.get(a) ?? false);
          const r = step(
            now,
            a.watch,
            { alive: isAlive, paused: a.paused, supervised: a.spec.supervise && a.desired === 'running' },
            { graceMs: w.graceMs, throttleMs: w.throttleMs },
          );
          a.watch = r.state;
          if (a.watch.nextNightlyAt !== null && now >= a.watch.nextNightlyAt) {
            a.watch = { ...a.watch, nextNightlyAt: nightlyOf(a.spec, deps.settings(), now) };
          }
          if (r.decision.action === 'none' && isAlive) a.gaveUpUntil = null;
          await act(a, r.decision).catch((e: unknown) => {
            log.error({ err: (e as Error).message, agent: a.spec.id }, 'watchdog action failed');
          });
        }),
      ),
    );
  }

  function schedule(): void {
    if (stopped) return;
    timer = clock.setTimeout(() => {
      timer = null;
      polling = pollOnce()
        .catch((e: unknown) => log.error({ err: e }, 'watchdog poll failed'))
        .finally(() => {
          polling = null;
          schedule();
        });
    }, deps.settings().watchdog.pollMs);
  }

  return {
    start() {
      stopped = false;
      schedule();
    },
    poll: () => pollOnce(),
    reschedule() {
      // Only a waiting timer moves; a poll under way schedules the next one when it ends.
      if (!timer) return;
      timer.cancel();
      timer = null;
      if (!polling) schedule();
    },
    async stop() {
      stopped = true;
      timer?.cancel();
      timer = null;
      await polling;
    },
  };
}
