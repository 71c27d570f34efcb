// What every tower component receives: injected clock, logger, store and shared services.
// Built once by the composition root (tower.ts); no module keeps its own globals.
import type { Clock } from '../lib/clock.js';
import type { Logger } from '../lib/log.js';
import type { Signal } from '../lib/signal.js';
import type { Authenticator } from './auth/authenticate.js';
import type { CredentialWatch } from './auth/credential-watch.js';
import type { SigningKeys } from './auth/signing-keys.js';
import type { RateLimiter } from './http/rate-limit.js';
import type { ControlHub } from './nodes/control-hub.js';
import type { Store } from './store/open.js';
import type { Write } from './store/tx.js';

export interface TowerConfig {
  dataDir: string;
  /** Events older than this are pruned (ms). */
  eventRetentionMs: number;
  bodyLimitBytes: number;
}

export interface TowerContext {
  clock: Clock;
  log: Logger;
  store: Store;
  config: TowerConfig;
  write: Write;
  /**
   * Fires when events written on this replica became readable: at commit on SQLite, once
   * the sequencer moved the watermark of `feed_events` past them on PostgreSQL (other
   * replicas' events: LISTEN on feed/event-log.ts notifyChannel). Readers select `id > last`
   * from `feed_events`.
   */
  eventsCommitted: Signal<void>;
  auth: Authenticator;
  /** Re-checks the credentials of open streams and channels; ends them once revoked. */
  credentials: CredentialWatch;
  keys: SigningKeys;
  rateLimiter: RateLimiter;
  /**
   * Failed authentications per client address: once an address has spent its window, its
   * requests are refused (429) before any credential is looked up (http/auth-hook.ts).
   */
  authFailures: RateLimiter;
  /** Node control channels connected to this replica: send messages, presence, attach secrets. */
  nodes: ControlHub;
  /** Aborted when the tower begins shutting down: long-lived streams end on it. */
  shutdown: AbortSignal;
}
