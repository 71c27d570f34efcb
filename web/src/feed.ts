// The live feed over GET /events/stream, read with fetch so the token travels in the
// Authorization header (EventSource cannot set headers, and tokens never go in URLs).
// Resumes with Last-Event-ID after every drop, backing off up to 5 s.
import { readSse } from '../../src/lib/sse-reader.js';
import type { FeedEvent, FeedReset } from '../../src/protocol/events.js';
import { rateLimit } from './api.js';

export type FeedState = 'connecting' | 'live' | 'down';

export interface FeedHandlers {
  onEvent(ev: FeedEvent): void;
  onState(state: FeedState, detail?: string): void;
  onReset?(info: FeedReset): void;
}

/** `base` is empty in the browser (same origin); tests pass the test server's URL. */
export function openFeed(token: string, query: URLSearchParams, h: FeedHandlers, base = ''): () => void {
  const abort = new AbortController();
  let lastId: string | null = null;
  let delay = 250;
  const run = async () => {
    while (!abort.signal.aborted) {
      h.onState('connecting');
      try {
        const headers: Record<string, string> = {
          authorization: `Bearer ${token}`,
          accept: 'text/event-stream',
        };
        if (lastId) headers['last-event-id'] = lastId;
        const qs = query.toString();
        const res = await fetch(`${base}/events/stream${qs ? `?${qs}` : ''}`, {
          headers,
          signal: abort.signal,
          cache: 'no-store',
          credentials: 'omit',
        });
        if (!res.ok || !res.body) {
          let detail = `HTTP ${res.status}`;
          try {
            detail = ((await res.json()) as { detail?: string }).detail ?? detail;
          } catch {}
          throw new Error(detail);
        }
        h.onState('live');
        delay = 250;
        await readSse(res.body, {
          event: ({ name, id, data }) => {
            const json = JSON.parse(data) as unknown;
            if (name === 'reset') h.onReset?.(json as FeedReset);
            else if (name === 'message') {
              if (id) lastId = id;
              h.onEvent(json as FeedEvent);
            }
            return true;
          },
        });
        throw new Error('the feed closed');
      } catch (e) {
        if (abort.signal.aborted) return;
        h.onState('down', (e as Error).message);
        await new Promise((r) => setTimeout(r, delay));
        delay = Math.min(delay * 2, 5000);
      }
    }
  };
  void run();
  return () => abort.abort();
}

/**
 * The console's one feed stream, opened at sign-in and kept while the user moves between
 * views, so the feed view shows what arrived while it was not on screen.
 */
export class FeedStore {
  events: FeedEvent[] = [];
  state: FeedState = 'connecting';
  detail: string | undefined;
  /** When the stream went down (ms since epoch), for the banner; null while up. */
  downSince: number | null = null;
  /** The last `reset` the tower sent: the console missed events it can no longer replay. */
  reset: (FeedReset & { at: string }) | null = null;
  private listeners = new Set<() => void>();
  private close: (() => void) | null = null;

  constructor(private readonly max = 500) {}

  start(token: string): void {
    this.stop();
    this.events = [];
    this.reset = null;
    this.downSince = null;
    this.close = openFeed(token, new URLSearchParams(), {
      onEvent: (ev) => {
        this.events = [ev, ...this.events].slice(0, this.max);
        if (ev.rate_limit) rateLimit.set(ev.rate_limit);
        this.notify();
      },
      onState: (s, detail) => {
        if (s === 'down' && this.downSince === null) this.downSince = Date.now();
        if (s === 'live') this.downSince = null;
        this.state = s;
        this.detail = detail;
        this.notify();
      },
      onReset: (info) => {
        // What is still on screen is older than the gap: keep it but say events are missing.
        this.reset = { ...info, at: new Date().toISOString() };
        this.notify();
      },
    });
  }

  stop(): void {
    this.close?.();
    this.close = null;
  }

  subscribe(fn: () => void): () => void {
    this.listeners.add(fn);
    return () => this.listeners.delete(fn);
  }

  private notify(): void {
    for (const fn of this.listeners) fn();
  }
}

export const feedStore = new FeedStore();
