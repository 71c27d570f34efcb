// The supervisor component: starts the agents of agents.toml on their unit backends,
// re-adopts what survived a svcd restart, runs the watchdog poll (the decision itself is
// watchdog.ts), and carries out start/stop/restart/pause/resume/signal. Operations on one
// agent are serialized, so the watchdog and an operator never race on the same unit.
import { existsSync } from 'node:fs';
import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import type { Clock, TimerHandle } from '../../lib/clock.js';
import { iso, systemClock } from '../../lib/clock.js';
import type { Logger } from '../../lib/log.js';
import type { AgentStatus, ReloadResult, SignalResult, UnitState } from '../../protocol/agents.js';
import { SvcError } from '../../protocol/errors.js';
import { loadSvcdConfig, type SvcdConfig } from '../config/config.js';
import type { Component, DaemonContext, SecretSession, SecretSessions } from '../context.js';
import { reapOrphanGroup } from '../process/group.js';
import type { ExitInfo } from '../runtimes/acp-session.js';
import { agentEnv, withoutCredentials } from '../runtimes/env.js';
import { RUNTIMES } from '../runtimes/kinds.js';
import type { ProgressUpdate } from '../runtimes/progress.js';
import { createRuntimeRunner, type RuntimeRunner } from '../runtimes/runner.js';
import { renderCommand, resolveSelf, selfCommand } from '../runtimes/template.js';
import { type AgentSpec, type BackendKind, loadAgentsFile } from './agents-file.js';
import { createProcessBackend } from './backends/process.js';
import { createSystemdBackend } from './backends/systemd.js';
import { createTmuxBackend, tmuxSocketOf } from './backends/tmux.js';
import type { RunningUnit, UnitBackend, UnitLaunch } from './backends/types.js';
import { registerAgentMethods } from './methods.js';
import { nextNightly } from './nightly.js';
import { deliverSignal } from './signal.js';
import { createSupervisorStore, type HistoryEntry } from './store.js';
import type { AgentTerminal } from './terminal.js';
import { afterManualRestart, type Decision, freshWatch, step, type WatchState } from './watchdog.js';

export interface SupervisorDeps {
  /** Mints the SVC_SECRETS_* session of every agent run (default: the broker's, ctx.secrets). */
  sessions?: SecretSessions;
  /** Real-time waits for process exits (default: the system clock, even when ctx.clock is fake). */
  waits?: Clock;
  /** Use this configuration instead of reading config.toml (tests, benchmarks). */
  config?: SvcdConfig;
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

interface Agent {
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

export function unitNameOf(spec: AgentSpec): string {
  return spec.runtime === 'mux_hosted' ? (spec.session ?? spec.id) : `svc-agent-${spec.id}`;
}

export function hasUserBus(env: NodeJS.ProcessEnv): boolean {
  if (env.DBUS_SESSION_BUS_ADDRESS) return true;
  return Boolean(env.XDG_RUNTIME_DIR && existsSync(join(env.XDG_RUNTIME_DIR, 'bus')));
}

export function chooseBackend(spec: AgentSpec, config: SvcdConfig, userBus: boolean): BackendKind {
  if (spec.backend) return spec.backend;
  if (spec.runtime === 'mux_hosted') return 'tmux';
  if (RUNTIMES[spec.runtime].protocol === 'acp' || spec.pty) return 'process';
  const b = config.supervisor.backend;
  if (b === 'auto') return userBus ? 'systemd' : 'process';
  return b;
}

export function createSupervisor(ctx: DaemonContext, deps: SupervisorDeps = {}): Supervisor {
  const log: Logger = ctx.log.child({ component: 'supervisor' });
  const waits = deps.waits ?? systemClock;
  const self = deps.self ?? selfCommand();
  const userBus = deps.userBus ?? hasUserBus(ctx.env);
  const sessions = deps.sessions ?? ctx.secrets;
  const store = createSupervisorStore(ctx.state);
  const agents = new Map<string, Agent>();
  const terminalListeners = new Set<(agentId: string, t: AgentTerminal | null) => void>();
  /** One-shot runs and ACP turns started by signals without wait: aborted and awaited at stop. */
  const background = new Map<Promise<unknown>, AbortController>();
  let config: SvcdConfig | null = deps.config ?? null;
  let timer: TimerHandle | null = null;
  let polling: Promise<void> | null = null;
  let stopped = false;

  const cfg = (): SvcdConfig => {
    if (!config) throw new Error('supervisor not started');
    return config;
  };
  const stopGraceMs = () => cfg().supervisor.stopGraceMs;
  const tmuxSocket = () => cfg().supervisor.tmuxSocket ?? tmuxSocketOf(ctx.paths.home);
  const baseEnv = withoutCredentials(ctx.env);
  const backends: Record<BackendKind, UnitBackend> = {
    process: createProcessBackend({ clock: ctx.clock, waits, stopGraceMs }),
    tmux: createTmuxBackend({
      socket: tmuxSocket,
      env: baseEnv,
      waits,
      stopGraceMs,
      self,
    }),
    systemd: createSystemdBackend({ env: ctx.env, stopGraceMs }),
  };
  let runner: RuntimeRunner | null = null;
  const runtimes: RuntimeRunner = {
    run: (req) => {
      runner ??= createRuntimeRunner({
        runtimes: cfg().runtime,
        sessions,
        logsDir: ctx.paths.logsDir,
        baseEnv: ctx.env,
        clock: ctx.clock,
        waits,
        stopGraceMs: stopGraceMs(),
        rotation: rotation(),
        self,
      });
      return runner.run(req);
    },
  };

  function rotation() {
    return { maxBytes: cfg().supervisor.logMaxBytes, keep: cfg().supervisor.logKeep };
  }

  function cwdOf(spec: AgentSpec): string {
    return spec.cwd ?? join(ctx.paths.home, 'agents', spec.id);
  }

  function logFileOf(spec: AgentSpec): string {
    return join(ctx.paths.logsDir, `${spec.id}.log`);
  }

  function fingerprintOf(spec: AgentSpec, c: SvcdConfig): string {
    return JSON.stringify({
      spec,
      template: c.runtime[spec.runtime],
      backend: chooseBackend(spec, c, userBus),
    });
  }

  function nightlyOf(spec: AgentSpec, from: number): number | null {
    const c = cfg().watchdog;
    const tod = spec.nightlyRestart === undefined ? c.nightlyRestart : spec.nightlyRestart;
    return tod ? nextNightly(from, tod, c.timezone) : null;
  }

  function newAgent(spec: AgentSpec, row?: { paused: boolean; restarts: number }): Agent {
    const c = cfg();
    return {
      spec,
      fingerprint: fingerprintOf(spec, c),
      backend: backends[chooseBackend(spec, c, userBus)],
      unitName: unitNameOf(spec),
      unit: null,
      session: null,
      state: 'stopped',
      desired: spec.supervise ? 'running' : 'stopped',
      paused: row?.paused ?? false,
      watch: freshWatch(nightlyOf(spec, ctx.clock.now())),
      startedAt: null,
      restarts: row?.restarts ?? 0,
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
  function exclusive<T>(a: Agent, fn: () => Promise<T>): Promise<T> {
    const p = a.queue.then(fn, fn);
    a.queue = p.catch(() => {});
    return p;
  }

  function find(idOrName: string): Agent {
    const a =
      agents.get(idOrName) ??
      [...agents.values()].find((x) => x.spec.profile === idOrName) ??
      [...agents.values()].find((x) => x.spec.runtime === 'mux_hosted' && x.unitName === idOrName);
    if (!a) {
      throw new SvcError(
        'agent_not_found',
        `no agent "${idOrName}" in ${ctx.paths.agentsToml} (by id, profile or session); see "svc agent supervise list"`,
      );
    }
    return a;
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
    const e: HistoryEntry = { at: iso(ctx.clock.now()), action, reason };
    await store.addHistory(a.spec.id, e);
  }

  async function publishMatrix(a: Agent, event: string, reason: string, extra: Record<string, unknown> = {}) {
    try {
      await ctx.events.publish({
        type: 'matrix',
        agent_id: a.spec.id,
        status: null,
        payload: {
          event,
          node_id: ctx.identity.node_id,
          agent_id: a.spec.id,
          runtime: a.spec.runtime,
          backend: a.backend.kind,
          unit: a.unitName,
          reason,
          restarts: a.restarts,
          at: iso(ctx.clock.now()),
          ...extra,
        },
      });
    } catch (e) {
      log.error({ err: e, agent: a.spec.id, event }, 'cannot record event');
    }
  }

  function publishProgress(a: Agent, u: ProgressUpdate, runId: string | null) {
    ctx.events
      .publish({
        type: 'progress',
        agent_id: a.spec.id,
        status: null,
        payload: {
          node_id: ctx.identity.node_id,
          agent_id: a.spec.id,
          runtime: a.spec.runtime,
          session_id: a.unit?.acp?.sessionId ?? null,
          run_id: runId,
          kind: u.kind,
          ...(u.text !== undefined ? { text: u.text } : {}),
          ...(u.data ? { data: u.data } : {}),
        },
      })
      .catch((e: unknown) => log.error({ err: e, agent: a.spec.id }, 'cannot record progress'));
  }

  function notifyTerminal(a: Agent, t: AgentTerminal | null) {
    for (const l of terminalListeners) {
      try {
        l(a.spec.id, t);
      } catch (e) {
        log.error({ err: e }, 'terminal listener failed');
      }
    }
  }

  function launchOf(a: Agent, session: SecretSession | null): UnitLaunch {
    const c = cfg();
    const spec = a.spec;
    const cwd = cwdOf(spec);
    const template = spec.command ?? c.runtime[spec.runtime].command;
    const rendered = renderCommand(template, { prompt: spec.prompt, task_id: '', workdir: cwd });
    const protocol = RUNTIMES[spec.runtime].protocol;
    return {
      agentId: spec.id,
      unit: a.unitName,
      argv: resolveSelf(rendered.argv, self),
      cwd,
      env: agentEnv({
        base: ctx.env,
        extra: [c.runtime[spec.runtime].env, spec.env],
        agentId: spec.id,
        unit: a.unitName,
        session: session ? session.env : {},
      }),
      logFile: logFileOf(spec),
      rotation: rotation(),
      mode: protocol === 'acp' ? 'acp' : spec.pty ? 'pty' : 'plain',
      onProgress: (u) => publishProgress(a, u, null),
      description: spec.runtime,
    };
  }

  /** Starts the agent's unit (caller holds the agent's queue). Failure leaves it dead. */
  async function launch(a: Agent): Promise<void> {
    await mkdir(cwdOf(a.spec), { recursive: true, mode: 0o700 });
    const session = sessions.mint(a.spec.id);
    const generation = ++a.generation;
    a.state = 'starting';
    let unit: RunningUnit;
    try {
      unit = await a.backend.start(launchOf(a, session));
    } catch (e) {
      session.revoke();
      a.state = 'dead';
      a.lastExit = { at: ctx.clock.now(), code: null, signal: null };
      await remember(a, 'start_failed', (e as Error).message);
      log.warn({ agent: a.spec.id, err: (e as Error).message }, 'agent failed to start');
      throw e;
    }
    a.unit = unit;
    a.session = session;
    a.state = 'running';
    a.startedAt = ctx.clock.now();
    await persist(a);
    log.info({ agent: a.spec.id, backend: a.backend.kind, pid: unit.pid }, 'agent started');
    if (unit.terminal) notifyTerminal(a, unit.terminal);
    unit.exited?.then((e) => onExit(a, generation, e));
  }

  function onExit(a: Agent, generation: number, e: ExitInfo): void {
    if (a.generation !== generation || a.state === 'stopping' || a.state === 'stopped') return;
    a.state = 'dead';
    a.lastExit = { at: ctx.clock.now(), code: e.code, signal: e.signal };
    a.session?.revoke();
    a.session = null;
    if (a.unit?.terminal) notifyTerminal(a, null);
    log.warn({ agent: a.spec.id, code: e.code, signal: e.signal }, 'agent exited');
  }

  /** Stops the agent's unit, whatever it left running (caller holds the queue). */
  async function halt(a: Agent): Promise<void> {
    const unit = a.unit;
    a.generation++;
    a.state = 'stopping';
    try {
      if (unit) await unit.stop();
    } finally {
      if (unit?.terminal) notifyTerminal(a, null);
      a.session?.revoke();
      a.session = null;
      a.unit = null;
      a.state = 'stopped';
      await persist(a);
    }
  }

  async function restartNow(a: Agent, reason: string, event: string): Promise<void> {
    await halt(a);
    a.restarts++;
    a.lastRestartAt = ctx.clock.now();
    a.lastRestartReason = reason;
    a.gaveUpUntil = null;
    await remember(a, event === 'agent.nightly_restart' ? 'nightly_restart' : 'restart', reason);
    try {
      await launch(a);
    } finally {
      await persist(a);
      await publishMatrix(a, event, reason, { pid: a.unit?.pid ?? null, started: a.state === 'running' });
    }
  }

  function statusOf(a: Agent): AgentStatus {
    const tmux = a.backend.kind === 'tmux' ? { socket: tmuxSocket(), session: a.unitName } : null;
    return {
      id: a.spec.id,
      runtime: a.spec.runtime,
      backend: a.backend.kind,
      unit: a.backend.kind === 'systemd' ? `${a.unitName}.service` : a.unitName,
      profile: a.spec.profile,
      supervise: a.spec.supervise,
      paused: a.paused,
      pty: a.spec.pty,
      state: a.state,
      pid: a.state === 'running' ? (a.unit?.pid ?? null) : null,
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
      log_file: a.backend.kind === 'systemd' ? null : logFileOf(a.spec),
      tmux,
    };
  }

  /** Asks the backends which units are alive; marks the dead ones. */
  async function probe(list: Agent[]): Promise<Map<Agent, boolean>> {
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
    const now = ctx.clock.now();
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
  }

  async function act(a: Agent, decision: Decision): Promise<void> {
    switch (decision.action) {
      case 'none':
        return;
      case 'restart':
        log.warn({ agent: a.spec.id, reason: decision.reason }, 'watchdog restarts dead agent');
        await restartNow(
          a,
          decision.reason === 'retry' ? 'dead (retry after throttle)' : 'dead',
          'agent.restarted',
        );
        return;
      case 'nightly_restart':
        log.info({ agent: a.spec.id }, 'nightly restart');
        await restartNow(a, 'nightly', 'agent.nightly_restart');
        return;
      case 'give_up':
        a.gaveUpUntil = decision.retryAt;
        log.error(
          { agent: a.spec.id, retry_at: iso(decision.retryAt) },
          'agent died again after restart; giving up until retry',
        );
        await remember(a, 'give_up', `dead again after restart; next attempt at ${iso(decision.retryAt)}`);
        await publishMatrix(a, 'agent.gave_up', 'dead again after restart', {
          retry_at: iso(decision.retryAt),
        });
        return;
    }
  }

  async function pollOnce(): Promise<void> {
    const list = [...agents.values()];
    const alive = await probe(list);
    const w = cfg().watchdog;
    await Promise.all(
      list.map((a) =>
        exclusive(a, async () => {
          if (agents.get(a.spec.id) !== a) return; // replaced by a reload meanwhile
          const now = ctx.clock.now();
          const isAlive = a.state === 'running' && (alive.get(a) ?? false);
          const r = step(
            now,
            a.watch,
            { alive: isAlive, paused: a.paused, supervised: a.spec.supervise && a.desired === 'running' },
            { graceMs: w.graceMs, throttleMs: w.throttleMs },
          );
          a.watch = r.state;
          if (a.watch.nextNightlyAt !== null && now >= a.watch.nextNightlyAt) {
            a.watch = { ...a.watch, nextNightlyAt: nightlyOf(a.spec, now) };
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
    timer = ctx.clock.setTimeout(() => {
      timer = null;
      polling = pollOnce()
        .catch((e: unknown) => log.error({ err: e }, 'watchdog poll failed'))
        .finally(() => {
          polling = null;
          schedule();
        });
    }, cfg().watchdog.pollMs);
  }

  /** Brings up one agent at svcd start: re-adopt its unit, or reap an orphan and start it. */
  async function bringUp(a: Agent, previousPid: number | null): Promise<void> {
    const adopted = await a.backend.adopt(launchOf(a, null), previousPid);
    if (adopted) {
      a.unit = adopted;
      a.state = 'running';
      a.startedAt = ctx.clock.now();
      a.generation++;
      await persist(a);
      await remember(a, 'adopted', `${a.backend.kind} unit ${a.unitName} survived the svcd restart`);
      log.info({ agent: a.spec.id, backend: a.backend.kind, pid: adopted.pid }, 'agent re-adopted');
      if (!a.spec.supervise) a.desired = 'running';
      return;
    }
    if (a.desired === 'running') await launch(a).catch(() => {});
    else await persist(a);
  }

  /** Stops what a previous svcd left running for agents no longer in agents.toml. */
  async function reapRemoved(
    id: string,
    row: { backend: string | null; unit: string | null; pid: number | null },
  ) {
    if (!row.unit) return;
    if (row.backend === 'process' && row.pid !== null) {
      await reapOrphanGroup(row.pid, row.unit, stopGraceMs(), waits);
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
      const a = newAgent(probe);
      a.unitName = row.unit.replace(/\.service$/, '');
      const unit = await a.backend.adopt(launchOf(a, null), row.pid);
      await unit?.stop();
    }
    await store.remove(id);
  }

  async function loadFiles(): Promise<{ config: SvcdConfig; specs: AgentSpec[] }> {
    const c = deps.config ?? (await loadSvcdConfig(ctx.paths.configToml));
    const specs = await loadAgentsFile(ctx.paths.agentsToml);
    return { config: c, specs };
  }

  const supervisor: Supervisor = {
    name: 'supervisor',
    runtimes,

    async start() {
      stopped = false;
      await store.migrate();
      const loaded = await loadFiles();
      config = loaded.config;
      const rows = await store.all();
      for (const spec of loaded.specs) agents.set(spec.id, newAgent(spec, rows.get(spec.id)));
      for (const [id, row] of rows) {
        if (!agents.has(id))
          await reapRemoved(id, row).catch((e: unknown) => log.warn({ err: e, agent: id }, 'cannot reap'));
      }
      await Promise.all(
        [...agents.values()].map((a) => exclusive(a, () => bringUp(a, rows.get(a.spec.id)?.pid ?? null))),
      );
      log.info({ agents: agents.size }, 'supervisor started');
      schedule();
    },

    async stop() {
      if (stopped) return;
      stopped = true;
      timer?.cancel();
      timer = null;
      await polling;
      for (const abort of background.values()) abort.abort();
      await Promise.allSettled([...background.keys()]);
      // svcd owns process units: they end with it. tmux sessions and systemd units live on
      // and are re-adopted by the next svcd.
      await Promise.all(
        [...agents.values()].map((a) =>
          exclusive(a, async () => {
            if (a.unit && a.backend.kind === 'process') await halt(a);
          }),
        ),
      );
    },

    status() {
      const states: Record<string, number> = {};
      for (const a of agents.values()) states[a.state] = (states[a.state] ?? 0) + 1;
      return { agents: agents.size, ...states };
    },

    listAgents() {
      // Code-point order: ids are ASCII, and localeCompare would page in ICU's collation data
      // (≈2 MiB of resident memory for the rest of the daemon's life).
      return [...agents.values()].map(statusOf).sort((x, y) => (x.id < y.id ? -1 : x.id > y.id ? 1 : 0));
    },

    async agentStatus(id) {
      const a = find(id);
      await exclusive(a, async () => {
        await probe([a]);
      });
      return { ...statusOf(a), history: await store.history(a.spec.id) };
    },

    async startAgent(id) {
      const a = find(id);
      await exclusive(a, async () => {
        a.desired = 'running';
        if (a.state === 'running') return;
        if (a.unit) await halt(a); // a dead unit: clear what it left behind
        a.watch = freshWatch(a.watch.nextNightlyAt);
        a.gaveUpUntil = null;
        await remember(a, 'start', 'operator');
        await launch(a);
      });
      return statusOf(a);
    },

    async stopAgent(id) {
      const a = find(id);
      await exclusive(a, async () => {
        a.desired = 'stopped';
        await halt(a);
        await remember(a, 'stop', 'operator');
      });
      return statusOf(a);
    },

    async restartAgent(id) {
      const a = find(id);
      await exclusive(a, async () => {
        a.desired = 'running';
        a.watch = afterManualRestart(a.watch, ctx.clock.now());
        await restartNow(a, 'manual', 'agent.restarted');
      });
      return statusOf(a);
    },

    async pauseAgent(id) {
      const a = find(id);
      await exclusive(a, async () => {
        a.paused = true;
        await persist(a);
        await remember(a, 'pause', 'operator');
      });
      return statusOf(a);
    },

    async resumeAgent(id) {
      const a = find(id);
      await exclusive(a, async () => {
        a.paused = false;
        // Resuming also lifts a give-up: the operator asks for auto-restart now.
        a.watch = freshWatch(a.watch.nextNightlyAt);
        a.gaveUpUntil = null;
        await persist(a);
        await remember(a, 'resume', 'operator');
      });
      return statusOf(a);
    },

    async reload() {
      // Parse everything first: an invalid file throws here and nothing changes.
      const loaded = await loadFiles();
      const oldConfig = cfg();
      config = loaded.config;
      runner = null;
      const result: ReloadResult = { added: [], removed: [], changed: [], unchanged: [] };
      const next = new Map(loaded.specs.map((s) => [s.id, s]));
      const work: Promise<unknown>[] = [];
      for (const [id, a] of agents) {
        if (!next.has(id)) {
          result.removed.push(id);
          agents.delete(id);
          work.push(
            exclusive(a, async () => {
              await halt(a);
              await store.remove(id);
            }),
          );
        }
      }
      for (const spec of loaded.specs) {
        const old = agents.get(spec.id);
        if (!old) {
          result.added.push(spec.id);
          const a = newAgent(spec);
          agents.set(spec.id, a);
          work.push(
            exclusive(a, async () => (a.desired === 'running' ? launch(a) : persist(a))).catch(() => {}),
          );
          continue;
        }
        if (old.fingerprint === fingerprintOf(spec, loaded.config)) {
          result.unchanged.push(spec.id);
          if (JSON.stringify(oldConfig.watchdog) !== JSON.stringify(loaded.config.watchdog)) {
            old.watch = { ...old.watch, nextNightlyAt: nightlyOf(spec, ctx.clock.now()) };
          }
          continue;
        }
        result.changed.push(spec.id);
        const a = newAgent(spec, { paused: old.paused, restarts: old.restarts });
        agents.set(spec.id, a);
        work.push(
          exclusive(old, () => halt(old))
            .then(() =>
              exclusive(a, async () => {
                await remember(a, 'reload', 'agents.toml or config.toml changed');
                if (a.desired === 'running') await launch(a);
                else await persist(a);
              }),
            )
            .catch(() => {}),
        );
      }
      await Promise.all(work);
      if (
        timer &&
        JSON.stringify(oldConfig.watchdog.pollMs) !== JSON.stringify(loaded.config.watchdog.pollMs)
      ) {
        timer.cancel();
        timer = null;
        if (!polling) schedule();
      }
      log.info(result, 'agents reloaded');
      return result;
    },

    poll: () => pollOnce(),

    terminal(agentId) {
      const a = agents.get(agentId);
      return a?.state === 'running' ? (a.unit?.terminal ?? null) : null;
    },

    onTerminal(listener) {
      terminalListeners.add(listener);
      return () => terminalListeners.delete(listener);
    },

    async signal(target, prompt, opts = {}) {
      const a = find(target);
      await mkdir(cwdOf(a.spec), { recursive: true, mode: 0o700 });
      return deliverSignal(
        {
          agentId: a.spec.id,
          spec: a.spec,
          running: a.state === 'running' ? a.unit : null,
          cwd: cwdOf(a.spec),
          logFile: logFileOf(a.spec),
          clock: ctx.clock,
          runtimes,
          publishProgress: (u, runId) => publishProgress(a, u, runId),
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

  registerAgentMethods(ctx.mgmt, supervisor);
  return supervisor;
}
