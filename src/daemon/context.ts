// What the composition root (daemon.ts) builds once and hands its components: clock, log,
// paths, identity, state.db, the tower client and control channel, the event outbox and the
// secrets sessions. Nothing here reads process.env or the wall clock directly.

import type { Clock } from '../lib/clock.js';
import type { Logger } from '../lib/log.js';
import type { NodeIdentity } from '../protocol/nodes.js';
import type { DaemonPaths } from './paths.js';
import type { SecretSessions } from './secrets/sessions.js';
import type { StateStore } from './state/store.js';
import type { TowerApi } from './tower-client/api.js';
import type { ControlChannel } from './tower-client/control.js';
import type { EventOutbox } from './tower-client/outbox.js';

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
  /** Secrets-broker sessions: components that start agents mint one per run. */
  secrets: SecretSessions;
  /** Aborted when the daemon begins shutting down. */
  shutdown: AbortSignal;
}
