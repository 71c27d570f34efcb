// One re-check loop for every open feed stream of this replica (SSE and WebSocket). Every
// RECHECK_MS each distinct credential among the open streams is looked up once, past the auth
// cache, so a token revoked on any replica, or expired, closes its streams within a second at
// the cost of one lookup per credential rather than per stream; keep-alives ride the same
// loop. It never delivers events (feed/hub.ts does).
import type { Clock, TimerHandle } from '../../lib/clock.js';
import type { Logger } from '../../lib/log.js';
import { isSvcError } from '../../protocol/errors.js';
import type { Authenticator } from '../auth/authenticate.js';

export const KEEPALIVE_MS = 15_000;
/** How often open streams' credentials are re-checked (revoked or expired → closed). */
export const RECHECK_MS = 500;

export interface WatchedStream {
  keepalive(): void;
  /** Ends the stream; `why` is a message the client can act on. */
  end(why: string): void;
}

export class StreamWatch {
  private readonly byHeader = new Map<string, Set<WatchedStream>>();
  private timer: TimerHandle | null = null;
  private lastKeepalive: number;
  private stopped = false;
  private readonly log: Logger;

  constructor(private readonly deps: { auth: Authenticator; clock: Clock; log: Logger }) {
    this.lastKeepalive = deps.clock.now();
    this.log = deps.log.child({ component: 'feed-watch' });
  }

  /** Watches a stream opened with `header` (its Authorization value); returns the unwatch. */
  add(header: string, stream: WatchedStream): () => void {
    let set = this.byHeader.get(header);
    if (!set) {
      set = new Set();
      this.byHeader.set(header, set);
    }
    const mine = set;
    mine.add(stream);
    this.arm();
    return () => {
      mine.delete(stream);
      if (mine.size === 0 && this.byHeader.get(header) === mine) this.byHeader.delete(header);
    };
  }

  stop(): void {
    this.stopped = true;
    this.timer?.cancel();
    this.timer = null;
  }

  private arm(): void {
    if (this.timer || this.stopped) return;
    this.timer = this.deps.clock.setTimeout(() => void this.tick(), RECHECK_MS);
  }

  private async tick(): Promise<void> {
    const now = this.deps.clock.now();
    const keepalive = now - this.lastKeepalive >= KEEPALIVE_MS;
    if (keepalive) this.lastKeepalive = now;
    await Promise.all(
      [...this.byHeader].map(async ([header, streams]) => {
        let why: string | null = null;
        try {
          await this.deps.auth.fromHeader(header, { fresh: true });
        } catch (e) {
          // A store that does not answer is not a revocation: keep the streams, ask again.
          if (!isSvcError(e) || e.code !== 'unauthenticated') {
            this.log.warn({ err: e }, 'cannot re-check a feed credential; trying again');
            return;
          }
          why = e.message;
        }
        for (const s of [...streams]) {
          if (why !== null) s.end(why);
          else if (keepalive) s.keepalive();
        }
      }),
    );
    this.timer = null;
    if (this.byHeader.size > 0) this.arm();
  }
}
