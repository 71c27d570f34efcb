// What every svcd component receives from the composition root (daemon.ts). Components
// take this context, register their mgmt.sock methods, and return start()/stop().
// Nothing here reads process.env or the wall clock directly.

import type { TSchema } from '@sinclair/typebox';
import type { Clock } from '../lib/clock.js';
import type { Logger } from '../lib/log.js';
import type { NewEvent } from '../protocol/events.js';
import type { NodeIdentity } from '../protocol/nodes.js';
import type { StateDb } from './state/db.js';
import type { ControlChannel } from './tower-client/control.js';

export interface DaemonPaths {
  /** $SVC_HOME */
  home: string;
  /** $SVC_HOME/svcd (0700) */
  svcdDir: string;
  mgmtSock: string;
  secretsSock: string;
  svcdSock: string;
  stateDb: string;
  configToml: string;
  agentsToml: string;
  cronToml: string;
  /** Rotating agent output logs. */
  logsDir: string;
  /** $SVC_HOME/work: per-task working directories. */
  workDir: string;
}

/** The tower's HTTP API, called with the node JWT. Errors are SvcErrors (tower_unreachable …). */
export interface TowerApi {
  readonly baseUrl: string;
  request<T>(method: string, path: string, body?: unknown): Promise<T>;
}

/**
 * Events the daemon reports to the tower feed (watchdog restarts, cron fires, attach
 * sessions, progress). publish() resolves once the event is in the durable outbox in
 * state.db; delivery retries until the tower has it, so a tower outage loses none, and the
 * tower de-duplicates retries by the event's key.
 */
export interface EventOutbox {
  publish(event: NewEvent): Promise<void>;
}

export interface StateMigration {
  version: number;
  name: string;
  /** Runs inside the migration's transaction. */
  up(db: StateDb): void;
}

/** state.db: one SQLite file shared by components, each with its own tables. */
export interface StateStore {
  /** Plain SQL on the file; each component types its own rows. */
  db: StateDb;
  /** Applies a component's migrations once, tracked per component name. */
  migrate(component: string, migrations: StateMigration[]): Promise<void>;
}

export interface CallContext {
  /** The JSON-RPC id of this request; null for a notification, a batch or an in-process call. */
  id: string | number | null;
  /** Aborted when the client disconnects. */
  signal: AbortSignal;
  /** Sends a JSON-RPC notification to this client (for streaming methods). */
  notify(method: string, params: unknown): void;
  /** Bytes sent to this client that it has not read yet: a streaming method's backlog. */
  unread(): number;
  /**
   * A streaming method calls this once its stream is open: the request then stops counting
   * against the connection's limit of requests running at once (it may stay open for hours).
   */
  streaming(): void;
}

export type MethodHandler = (params: unknown, call: CallContext) => Promise<unknown>;

/** mgmt.sock's method table; names are noun.verb (docs/architecture.md, mgmt.sock). */
export interface MethodRegistry {
  /** params are validated against `schema` (if given) before the handler runs. */
  register(name: string, handler: MethodHandler, schema?: TSchema): void;
}

/**
 * A secrets-broker session, minted per agent run (docs/secrets.md). Add `env` to
 * the agent's environment; call revoke() when the agent exits, after which its requests on
 * secrets.sock are refused with unknown_session.
 */
export interface SecretSession {
  /** 256 bits of randomness, base64url. */
  readonly id: string;
  readonly agentId: string;
  /** secrets.sock, as the agent sees it in SVC_SECRETS_SOCKET. */
  readonly socketPath: string;
  readonly env: { SVC_SECRETS_SOCKET: string; SVC_SECRETS_SESSION: string };
  /** Ends the session: secrets.sock refuses it from now on. Idempotent. */
  revoke(): void;
}

export interface SecretSessions {
  mint(agentId: string): SecretSession;
  /** The agent a live session belongs to, or null. */
  resolve(sessionId: string): string | null;
}

export interface DaemonContext {
  clock: Clock;
  log: Logger;
  paths: DaemonPaths;
  identity: NodeIdentity;
  /** The daemon's own environment as read once at start (for config defaults only). */
  env: NodeJS.ProcessEnv;
  state: StateStore;
  tower: TowerApi;
  /** The control channel to the tower: task_ready, task_cancelled, attach.open arrive here. */
  control: ControlChannel;
  events: EventOutbox;
  mgmt: MethodRegistry;
  /** Secrets-broker sessions: components that start agents mint one per run. */
  secrets: SecretSessions;
  /** Aborted when the daemon begins shutting down. */
  shutdown: AbortSignal;
}

/** A part of svcd with a lifecycle. stop() is idempotent and waits for its loops. */
export interface Component {
  readonly name: string;
  start(): Promise<void>;
  stop(): Promise<void>;
  /** Summary for daemon.status. */
  status?(): Record<string, unknown>;
}
