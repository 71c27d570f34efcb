// Wire shapes of svcd's cron methods on mgmt.sock (cron.list|describe|history|reload|gc) and
// of the `matrix` event every cron fire publishes. The daemon answers with these, the CLI
// prints them, docs/cron.md documents them.

import { Timestamp } from './common.js';
import { type Static, Type } from './type.js';

const Nullable = <T extends ReturnType<typeof Type.String>>(t: T) => Type.Union([t, Type.Null()]);
const NullableInt = Type.Union([Type.Integer(), Type.Null()]);

export const CRON_OUTCOMES = ['running', 'ok', 'failed', 'timeout', 'skipped', 'interrupted'] as const;
export type CronOutcome = (typeof CRON_OUTCOMES)[number];

/** Why a due minute did not run. */
/**
 * Why a due minute was not fired. `state_unwritable`: its dedup key could not be made durable in
 * state.db (disk full, read-only, I/O error), so firing could fire twice after a restart.
 */
export const CRON_SKIP_REASONS = ['overlap', 'disabled', 'missed_while_down', 'state_unwritable'] as const;
export type CronSkipReason = (typeof CRON_SKIP_REASONS)[number];

export const CronDispatch = Type.Union([Type.Literal('signal'), Type.Literal('bash')]);
export type CronDispatch = Static<typeof CronDispatch>;
export const CronCatchUp = Type.Union([Type.Literal('none'), Type.Literal('latest')]);
export type CronCatchUp = Static<typeof CronCatchUp>;

/** One entry of a job's history: a fire, or a due minute that was skipped (and why). */
export const CronFire = Type.Object({
  id: Type.Integer(),
  job: Type.String(),
  /** The minute the fire belongs to (ISO UTC); with the job name, its dedup key. */
  scheduled_minute: Timestamp,
  dispatch: CronDispatch,
  outcome: Type.Union(CRON_OUTCOMES.map((o) => Type.Literal(o))),
  reason: Type.Union([...CRON_SKIP_REASONS.map((r) => Type.Literal(r)), Type.Null()]),
  /** True when this fire ran a minute missed while svcd was down (catch_up = "latest"). */
  catch_up: Type.Boolean(),
  started_at: Nullable(Timestamp),
  finished_at: Nullable(Timestamp),
  duration_ms: NullableInt,
  /** bash: the exit code (null when killed by a signal or not run). */
  exit_code: NullableInt,
  /** bash: the last 4 KiB of stdout and stderr, interleaved. */
  output_tail: Nullable(Type.String()),
  /** A sentence about what happened: the error of a failed signal, the minutes missed… */
  detail: Nullable(Type.String()),
});
export type CronFire = Static<typeof CronFire>;

/** A job as the daemon runs it (after parsing and defaults). */
export const CronJobView = Type.Object({
  name: Type.String(),
  kind: Type.Union([Type.Literal('schedule'), Type.Literal('heartbeat')]),
  /** 5-field expression (kind schedule), else null. */
  schedule: Nullable(Type.String()),
  /** The interval as written (kind heartbeat), else null. */
  interval: Nullable(Type.String()),
  /** The interval after rounding up to whole minutes, in ms (kind heartbeat), else null. */
  interval_ms: NullableInt,
  session: Nullable(Type.String()),
  prompt: Type.String(),
  dispatch: CronDispatch,
  enabled: Type.Boolean(),
  catch_up: CronCatchUp,
  /** bash: the effective timeout in ms; signal: null. */
  timeout_ms: NullableInt,
  /** Line of the job's [[job]] header in cron.toml. */
  line: Type.Integer(),
  next_fire: Nullable(Timestamp),
  /** next_fire in the cron timezone, ISO 8601 with its UTC offset. */
  next_fire_local: Nullable(Type.String()),
  running: Type.Boolean(),
  last_fire: Type.Union([CronFire, Type.Null()]),
});
export type CronJobView = Static<typeof CronJobView>;

export const CronList = Type.Object({
  file: Type.String(),
  /** IANA zone the schedules are read in (the configured one or the host's). */
  timezone: Type.String(),
  /** The error of the last failed load, while the previous config stays in force. */
  config_error: Nullable(Type.String()),
  /**
   * Set while state.db cannot take the dedup keys of due fires (disk full, read-only): those
   * fires are skipped (`state_unwritable`), never fired twice. Says what fails, where, since when.
   */
  state_error: Nullable(Type.String()),
  /** The minute this svcd process last ticked (ISO UTC); null before its first tick. */
  last_tick: Nullable(Timestamp),
  jobs: Type.Array(CronJobView),
});
export type CronList = Static<typeof CronList>;

export const CronDescribe = Type.Composite([
  CronJobView,
  Type.Object({
    timezone: Type.String(),
    /** What happens to minutes missed while svcd is down, in words. */
    missed_minutes: Type.String(),
  }),
]);
export type CronDescribe = Static<typeof CronDescribe>;

export const CronJobName = Type.Object(
  { name: Type.String({ minLength: 1, maxLength: 200 }) },
  { additionalProperties: false },
);
export type CronJobName = Static<typeof CronJobName>;

export const CRON_HISTORY_MAX = 100;

export const CronHistoryParams = Type.Object(
  {
    name: Type.String({ minLength: 1, maxLength: 200 }),
    limit: Type.Optional(Type.Integer({ minimum: 1, maximum: CRON_HISTORY_MAX, default: CRON_HISTORY_MAX })),
  },
  { additionalProperties: false },
);
export type CronHistoryParams = Static<typeof CronHistoryParams>;

export const CronHistory = Type.Object({
  job: Type.String(),
  /** Newest first. */
  items: Type.Array(CronFire),
});
export type CronHistory = Static<typeof CronHistory>;

export const CronReload = Type.Object({
  file: Type.String(),
  jobs: Type.Integer(),
  added: Type.Array(Type.String()),
  removed: Type.Array(Type.String()),
  changed: Type.Array(Type.String()),
});
export type CronReload = Static<typeof CronReload>;

export const CronGc = Type.Object({
  /** Dedup keys removed (their scheduled minute was more than 24 h ago). */
  removed: Type.Integer(),
  older_than: Timestamp,
});
export type CronGc = Static<typeof CronGc>;

/** payload of the `matrix` feed event published for every fire and recorded skip. */
export interface CronFireEventPayload {
  kind: 'cron.fire';
  node_id: string;
  job: string;
  scheduled_minute: string;
  dispatch: CronDispatch;
  outcome: CronOutcome;
  reason: CronSkipReason | null;
  catch_up: boolean;
  exit_code: number | null;
  duration_ms: number | null;
}
