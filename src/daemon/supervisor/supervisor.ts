// The supervisor component: composes the agent table, unit lifecycle, watchdog loop and event
// publishing, and carries out operator requests and reload on them, one agent's operations at a
// time (agent.ts exclusive()), so the watchdog and an operator never race on a unit.
import { mkdir } from 'node:fs/promises';
import type { Clock } from '../../lib/clock.js';
import { systemClock } from '../../lib/clock.js';
import type { Logger } from '../../lib/log.js';
import type { AgentStatus, ReloadResult, SignalResult } from '../../protocol/agents.js';
import type { Component } from '../component.js';
import type { SupervisorMetrics } from '../metrics.js';
import type { DaemonPaths } from '../paths.js';
import type { AgentTerminal } from '../process/terminal.js';
import { withoutCredentials } from '../runtimes/env.js';
import { createRuntimeRunner, type RuntimeRunner } from '../runtimes/runner.js';
import { selfCommand } from '../runtimes/template.js';
import type { SecretSessions } from '../secrets/sessions.js';
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
import { createTmuxBackend, tmuxSocketOf } from './backends/tmux.js';
import type { UnitBackend } from './backends/types.js';
import type { SupervisorSettings } from './config-section.js';
import { createSupervisorEvents } from './events.js';
import { createUnitLifecycle } from './lifecycle.js';
import { deliverSignal } from './signal.js';
import { createSupervisorStore } from './store.js';
import { afterManualRestart, freshWatch } from './watchdog.js';
import { createWatchdogLoop } from './watchdog-loop.js';

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
  /** Restarts and watchdog actions are counted here (svcd's metrics). */
  metrics?: SupervisorMetrics;
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
  /** [supervisor] tmux_socket, else this SVC_HOME's own tmux server. */
  const tmuxSocket = () => settings.supervisor.tmuxSocket ?? tmuxSocketOf(paths.home);
  const backends: Record<BackendKind, UnitBackend> = {
    process: createProcessBackend({ clock, waits, stopGraceMs }),
    tmux: createTmuxBackend({
      socket: tmuxSocket,
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
    ...(deps.metrics ? { metrics: deps.metrics } : {}),
  });
  const watchdog = createWatchdogLoop({
    clock,
    log,
    table,
    lifecycle,
    events,
    settings: current,
    ...(deps.metrics ? { metrics: deps.metrics } : {}),
  });
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
    statusOf(a, { logsDir: paths.logsDir, tmuxSocket: tmuxSocket(), now: clock.now() });

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
