// One re-check loop for every long-lived connection of this replica opened with a credential:
// feed streams (SSE and WebSocket), node control channels, and both sides of attach streams.
// Every RECHECK_MS each distinct credential among them is re-checked once, past the auth cache
// (node JWTs in bulk: Authenticator.recheck; the signing keys re-read at most once per period), so a token
// revoked, a node re-registered (its JWT rotated), a signing key retired on any replica, or a
// credential expired, ends its connections within a second, at the cost of one lookup per
// credential rather than per connection. The feed's keep-alives ride the same loop. It never
// delivers anything itself.
import type { Clock, TimerHandle } from '../../lib/clock.js';
import type { Logger } from '../../lib/log.js';
import type { Authenticator, Recheck } from './authenticate.js';

export const KEEPALIVE_MS = 15_000;
/** How often open streams' credentials are re-checked (revoked or expired → closed). */
export const RECHECK_MS = 500;

export interface WatchedStream {
  keepalive?(): void;
  /** Ends the stream; `why` is a message the client can act on. */
  end(why: string): void;
}

export class CredentialWatch {
  private readonly byHeader = new Map<string, Set<WatchedStream>>();
  private timer: TimerHandle | null = null;
  private lastKeepalive: number;
  private stopped = false;
  private readonly log: Logger;

  constructor(private readonly deps: { auth: Authenticator; clock: Clock; log: Logger }) {
    this.lastKeepalive = deps.clock.now();
    this.log = deps.log.child({ component: 'credential-watch' });
  }

  /** Open connections watched, for tests and metrics. */
  get size(): number {
    let n = 0;
    for (const set of this.byHeader.values()) n += set.size;
    return n;
  }

  /** Watches a connection opened with `header` (its Authorization value); returns the unwatch. */
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

  private ticked: (() => void)[] = [];

  /** Resolves after the next re-check has run (tests). */
  nextCheck(): Promise<void> {
    return new Promise((r) => this.ticked.push(r));
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
    // A pass over a fleet's channels runs twice a second: it copies nothing it need not.
    const headers = [...this.byHeader.keys()];
    let verdicts: Map<string, Recheck>;
    try {
      verdicts = await this.deps.auth.recheck(headers);
    } catch (e) {
      verdicts = new Map(headers.map((header) => [header, { ok: 'unknown', err: e }]));
    }
    let unknown = 0;
    let firstError: unknown;
    for (const header of headers) {
      // The streams of this credential now: gone ones are not ended, ones opened while it
      // was checked are (a refused credential ends every stream it opened).
      const streams = this.byHeader.get(header);
      if (streams === undefined) continue;
      const v = verdicts.get(header);
      // A store that does not answer is not a revocation: keep the streams, ask again.
      if (v === undefined || v.ok === 'unknown') {
        unknown++;
        firstError ??= v?.err;
        continue;
      }
      if (v.ok === false) for (const s of [...streams]) s.end(v.why);
      else if (keepalive) for (const s of streams) s.keepalive?.();
    }
    if (unknown > 0) {
      this.log.warn({ err: firstError, credentials: unknown }, 'cannot re-check credentials; trying again');
    }
    this.timer = null;
    if (this.byHeader.size > 0) this.arm();
    for (const w of this.ticked.splice(0)) w();
  }
}
