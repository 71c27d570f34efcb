// mgmt.sock shapes of supervised agents (docs/agents.md: agent.list|status|start|stop|restart|
// signal|pause|resume, plus agent.reload). `svc agent supervise …` and `svc agent signal`
// are thin calls of these methods.

import { RuntimeKindSchema } from './runtimes.js';
import { type Static, Type } from './type.js';

const Nullable = <T extends ReturnType<typeof Type.String>>(t: T) => Type.Union([t, Type.Null()]);
const NullableInt = Type.Union([Type.Integer(), Type.Null()]);

/** Params of agent.status|start|stop|restart|pause|resume: an agent id (or profile/session). */
export const AgentRef = Type.Object(
  { id: Type.String({ minLength: 1, maxLength: 64 }) },
  { additionalProperties: false },
);
export type AgentRef = Static<typeof AgentRef>;

export const AgentSignalParams = Type.Object(
  {
    /** Agent id, profile, or (mux_hosted) tmux session name. */
    target: Type.String({ minLength: 1, maxLength: 64 }),
    /** Default: the agent's `prompt` from agents.toml. */
    prompt: Type.Optional(Type.String({ maxLength: 100_000 })),
    /** Wait for the turn (ACP) or run (CLI kinds) to finish and return its outcome. */
    wait: Type.Optional(Type.Boolean()),
  },
  { additionalProperties: false },
);
export type AgentSignalParams = Static<typeof AgentSignalParams>;

export const UNIT_STATES = ['running', 'dead', 'stopped', 'starting', 'stopping'] as const;
export type UnitState = (typeof UNIT_STATES)[number];

export const HistoryItem = Type.Object({ at: Type.String(), action: Type.String(), reason: Type.String() });

/** CPU and resident memory of the agent's process (Linux /proc; absent when not running). */
export const AgentUsage = Type.Object({
  /** Percent of one core since the previous status (null on the first one). */
  cpu_percent: Type.Union([Type.Number(), Type.Null()]),
  /** CPU time used since the process started (user + system). */
  cpu_seconds: Type.Number(),
  rss_bytes: Type.Integer(),
});
export type AgentUsage = Static<typeof AgentUsage>;

export const AgentStatus = Type.Object({
  id: Type.String(),
  runtime: RuntimeKindSchema,
  backend: Type.Union([Type.Literal('process'), Type.Literal('tmux'), Type.Literal('systemd')]),
  /** Unit name: svc-agent-<id> (systemd: + .service), or the tmux session. */
  unit: Type.String(),
  profile: Nullable(Type.String()),
  supervise: Type.Boolean(),
  paused: Type.Boolean(),
  pty: Type.Boolean(),
  state: Type.Union(UNIT_STATES.map((s) => Type.Literal(s))),
  pid: NullableInt,
  started_at: Nullable(Type.String()),
  restarts: Type.Integer(),
  last_restart_at: Nullable(Type.String()),
  last_restart_reason: Nullable(Type.String()),
  /** Set while the watchdog has given up (until the throttle allows the next attempt). */
  gave_up_until: Nullable(Type.String()),
  next_nightly_restart_at: Nullable(Type.String()),
  last_exit: Type.Union([
    Type.Object({ at: Type.String(), code: NullableInt, signal: Nullable(Type.String()) }),
    Type.Null(),
  ]),
  /** When the watchdog last looked at the unit. */
  checked_at: Nullable(Type.String()),
  log_file: Nullable(Type.String()),
  /** mux_hosted: where the pane is (tmux -L socket attach -t session). */
  tmux: Type.Union([Type.Object({ socket: Type.String(), session: Type.String() }), Type.Null()]),
  usage: Type.Optional(Type.Union([AgentUsage, Type.Null()])),
  /** agent.status only: the last watchdog and operator actions, oldest first. */
  history: Type.Optional(Type.Array(HistoryItem)),
});
export type AgentStatus = Static<typeof AgentStatus>;

export const SignalResult = Type.Object({
  agent_id: Type.String(),
  runtime: RuntimeKindSchema,
  /** acp_prompt: a prompt on the ACP session; send_keys: typed into the tmux pane;
   *  pty_input: typed into the PTY; one_shot: a new run of the CLI agent. */
  delivery: Type.Union([
    Type.Literal('acp_prompt'),
    Type.Literal('send_keys'),
    Type.Literal('pty_input'),
    Type.Literal('one_shot'),
  ]),
  /** Id of the one-shot run or ACP prompt (in the agent's log); null for typed input. */
  run_id: Nullable(Type.String()),
  /** True when the outcome below is final (wait = true, or typed input, which has none). */
  done: Type.Boolean(),
  ok: Type.Union([Type.Boolean(), Type.Null()]),
  exit_code: NullableInt,
  stop_reason: Nullable(Type.String()),
  failure: Nullable(Type.String()),
  summary: Nullable(Type.String()),
});
export type SignalResult = Static<typeof SignalResult>;

export const ReloadResult = Type.Object({
  added: Type.Array(Type.String()),
  removed: Type.Array(Type.String()),
  changed: Type.Array(Type.String()),
  unchanged: Type.Array(Type.String()),
});
export type ReloadResult = Static<typeof ReloadResult>;
