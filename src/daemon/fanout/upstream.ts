// Follows the tower's /events/stream with the node JWT: resumes after the last id it got,
// reconnects with backoff (1 s doubling to 30 s, jitter), and reports each transition
// (down with the HTTP status or error, up again) to its owner. Keeps the reconnect history.

import { Backoff } from '../../lib/backoff.js';
import type { Clock, TimerHandle } from '../../lib/clock.js';
import { iso } from '../../lib/clock.js';
import type { Logger } from '../../lib/log.js';
import { readSse } from '../../lib/sse-reader.js';
import type { FeedEvent } from '../../protocol/events.js';

/** No byte for this long (the tower sends a keep-alive every 15 s) = a dead connection. */
export const UPSTREAM_IDLE_MS = 45_000;

export interface UpstreamDown {
  /** HTTP status of a non-200 answer; null when the connection failed or dropped. */
  status: number | null;
  error: string;
}

export interface Outage {
  down_at: string;
  up_at: string | null;
  status: number | null;
  error: string;
  /** Connection attempts made while down. */
  attempts: number;
}

export interface UpstreamHandlers {
  event(ev: FeedEvent): void;
  /** The tower sent `reset`: events between last_event_id and resume_after are gone. */
  reset(info: { reason: string; last_event_id: string; resume_after: string }): void;
  down(info: UpstreamDown & { retry_in_ms: number }): void;
  up(info: { down_for_ms: number; attempts: number }): void;
}

export interface UpstreamOptions {
  url: string;
  jwt: string;
  clock: Clock;
  log: Logger;
  handlers: UpstreamHandlers;
  /** Before each connection: resolves when svcd may read upstream again (the hold is full). */
  ready(): Promise<void>;
  /** The tower id to resume after at the first connect (svcd's position before a restart). */
  resumeAfter?: string | null;
  random?: () => number;
  historySize?: number;
}

export type UpstreamState = 'connecting' | 'up' | 'down' | 'stopped';

export class Upstream {
  private state: UpstreamState = 'connecting';
  private lastId: string | null = null;
  private readonly outages: Outage[] = [];
  private readonly reconnects: string[] = [];
  private connectedSince: number | null = null;
  private connects = 0;
  private events = 0;
  private loop: Promise<void> | null = null;
  private readonly abort = new AbortController();
  private conn: AbortController | null = null;
  private pauseRequested = false;
  private readonly backoff: Backoff;

  constructor(private readonly opts: UpstreamOptions) {
    this.backoff = new Backoff(opts.random ? { random: opts.random } : {});
    this.lastId = opts.resumeAfter ?? null;
  }

  start(): void {
    this.loop ??= this.run().catch((e: unknown) => {
      this.opts.log.error({ err: e }, 'fan-out upstream loop failed');
    });
  }

  async stop(): Promise<void> {
    this.abort.abort();
    this.conn?.abort();
    await this.loop;
    this.state = 'stopped';
  }

  /** Drops the current connection on purpose (the hold is full); it resumes by id later. */
  pause(): void {
    this.pauseRequested = true;
    this.conn?.abort();
  }

  status() {
    const last = this.outages.at(-1);
    const down = this.state === 'down' && last !== undefined;
    return {
      state: this.state,
      url: this.opts.url,
      last_event_id: this.lastId,
      connected_since: this.connectedSince === null ? null : iso(this.connectedSince),
      /** Up since / down since. */
      since: down ? last.down_at : this.connectedSince === null ? null : iso(this.connectedSince),
      last_status: down ? last.status : null,
      last_error: down ? last.error : null,
      connects: this.connects,
      events: this.events,
      outages: this.outages.map((o) => ({ ...o })),
    };
  }

  /** Times of the reconnects after the first connect (the last 50). */
  reconnectTimes(): string[] {
    return [...this.reconnects];
  }

  private async run(): Promise<void> {
    const signal = this.abort.signal;
    while (!signal.aborted) {
      await this.opts.ready();
      if (signal.aborted) break;
      this.pauseRequested = false;
      const failure = await this.connectOnce();
      if (signal.aborted) break;
      if (failure === 'paused') continue;
      const wait = this.backoff.next();
      this.markDown(failure, wait);
      try {
        await this.opts.clock.sleep(wait, signal);
      } catch {
        break;
      }
    }
  }

  /** One connection: returns why it ended. */
  private async connectOnce(): Promise<UpstreamDown | 'paused'> {
    const conn = new AbortController();
    this.conn = conn;
    const onStop = () => conn.abort();
    this.abort.signal.addEventListener('abort', onStop, { once: true });
    let lastByte = this.opts.clock.now();
    let idle = false;
    let watchdog: TimerHandle | null = null;
    const check = () => {
      if (this.opts.clock.now() - lastByte > UPSTREAM_IDLE_MS) {
        idle = true;
        conn.abort();
      } else watchdog = this.opts.clock.setTimeout(check, 5000);
    };
    watchdog = this.opts.clock.setTimeout(check, 5000);
    try {
      const res = await fetch(this.opts.url, {
        headers: {
          authorization: `Bearer ${this.opts.jwt}`,
          accept: 'text/event-stream',
          ...(this.lastId !== null ? { 'last-event-id': this.lastId } : {}),
        },
        signal: conn.signal,
      });
      if (res.status !== 200 || !res.body) {
        const text = await res.text().catch(() => '');
        return { status: res.status, error: problemDetail(text) ?? `HTTP ${res.status}` };
      }
      this.markUp();
      await readSse(res.body, {
        chunk: () => {
          lastByte = this.opts.clock.now();
        },
        event: (ev) => {
          this.onMessage(ev.name, ev.data);
          return true;
        },
      });
      return { status: null, error: 'upstream closed the stream' };
    } catch (e) {
      if (this.pauseRequested) return 'paused';
      if (idle)
        return { status: null, error: `no data for ${UPSTREAM_IDLE_MS / 1000} s (keep-alives stopped)` };
      const cause = (e as { cause?: { code?: string; message?: string } }).cause;
      return { status: null, error: cause?.code ?? cause?.message ?? (e as Error).message };
    } finally {
      watchdog?.cancel();
      this.abort.signal.removeEventListener('abort', onStop);
      this.conn = null;
      if (this.state === 'up') this.connectedSince = null;
    }
  }

  private onMessage(name: string, data: string): void {
    let parsed: unknown;
    try {
      parsed = JSON.parse(data);
    } catch {
      this.opts.log.warn({ event: name }, 'fan-out: upstream sent data that is not JSON; skipped');
      return;
    }
    if (name === 'reset') {
      const info = parsed as { reason: string; last_event_id: string; resume_after: string };
      this.lastId = info.resume_after;
      this.opts.handlers.reset(info);
      return;
    }
    if (name !== 'message') return;
    const ev = parsed as FeedEvent;
    if (typeof ev.id !== 'string' || !/^[0-9]+$/.test(ev.id)) return;
    this.lastId = ev.id;
    this.events++;
    this.opts.handlers.event(ev);
  }

  private markUp(): void {
    const now = this.opts.clock.now();
    this.connects++;
    this.connectedSince = now;
    this.backoff.reset();
    const wasDown = this.state === 'down';
    this.state = 'up';
    if (this.connects > 1) {
      this.reconnects.push(iso(now));
      if (this.reconnects.length > (this.opts.historySize ?? 50)) this.reconnects.shift();
    }
    const outage = this.outages.at(-1);
    if (wasDown && outage && outage.up_at === null) {
      outage.up_at = iso(now);
      this.opts.log.info({ attempts: outage.attempts }, 'fan-out: upstream back');
      this.opts.handlers.up({ down_for_ms: now - Date.parse(outage.down_at), attempts: outage.attempts });
    }
  }

  private markDown(why: UpstreamDown, retryInMs: number): void {
    if (this.state === 'down') {
      const o = this.outages.at(-1);
      if (o) {
        o.attempts++;
        o.status = why.status;
        o.error = why.error;
      }
      return;
    }
    this.state = 'down';
    this.outages.push({ down_at: iso(this.opts.clock.now()), up_at: null, ...why, attempts: 1 });
    if (this.outages.length > (this.opts.historySize ?? 50)) this.outages.shift();
    this.opts.log.warn(
      { status: why.status, error: why.error, retry_in_ms: retryInMs },
      'fan-out: upstream down',
    );
    this.opts.handlers.down({ ...why, retry_in_ms: retryInMs });
  }
}

/** The problem+json detail of an error body, if it is one. */
function problemDetail(text: string): string | null {
  try {
    const p = JSON.parse(text) as { detail?: unknown; title?: unknown };
    if (typeof p.detail === 'string') return p.detail;
    if (typeof p.title === 'string') return p.title;
  } catch {}
  return null;
}
