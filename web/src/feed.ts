// The live feed over GET /events/stream, read with fetch so the token travels in the
// Authorization header (EventSource cannot set headers, and tokens never go in URLs).
// Resumes with Last-Event-ID after every drop, backing off up to 5 s. The store first shows
// the recent history (GET /events, paged backwards) and follows live from where it ends.
import { readSse } from '../../src/lib/sse-reader.js';
import type { FeedEvent, FeedReset, HistoryPage } from '../../src/protocol/events.js';
import { api, errorText, rateLimit } from './api.js';

export type FeedState = 'connecting' | 'live' | 'down';

export interface FeedHandlers {
  onEvent(ev: FeedEvent): void;
  onState(state: FeedState, detail?: string): void;
  onReset?(info: FeedReset): void;
}

/** `base` is empty in the browser (same origin); tests pass the test server's URL. */
export function openFeed(
  token: string,
  query: URLSearchParams,
  h: FeedHandlers,
  base = '',
  after: string | null = null,
): () => void {
  const abort = new AbortController();
  let lastId: string | null = after;
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
  /** Where older events go on (GET /events?before=); null once the oldest kept one is shown. */
  older: string | null = null;
  /** The history is being read (first page or an older one). */
  loadingHistory = false;
  historyError: string | null = null;
  private listeners = new Set<() => void>();
  private close: (() => void) | null = null;
  private generation = 0;
  /** Events loaded with loadOlder beyond `max`: kept while live events arrive. */
  private extra = 0;

  constructor(
    private readonly max = 500,
    private readonly firstPage = 100,
  ) {}

  start(token: string): void {
    this.stop();
    const gen = ++this.generation;
    this.events = [];
    this.reset = null;
    this.downSince = null;
    this.older = null;
    this.extra = 0;
    this.historyError = null;
    this.loadingHistory = true;
    this.notify();
    void (async () => {
      // History first, then live from its newest id: nothing between the two is lost.
      let after: string | null = null;
      try {
        const page = await api<HistoryPage>('GET', `/events?limit=${this.firstPage}`, undefined, token);
        if (gen !== this.generation) return;
        this.events = page.items;
        this.older = page.next_cursor;
        after = page.last_event_id;
      } catch (e) {
        if (gen !== this.generation) return;
        this.historyError = errorText(e);
      }
      this.loadingHistory = false;
      this.notify();
      this.open(token, after);
    })();
  }

  /** The next page of older events, below the oldest shown. */
  async loadOlder(): Promise<void> {
    if (!this.older || this.loadingHistory) return;
    const gen = this.generation;
    this.loadingHistory = true;
    this.notify();
    try {
      const page = await api<HistoryPage>('GET', `/events?limit=${this.firstPage}&before=${this.older}`);
      if (gen !== this.generation) return;
      const known = new Set(this.events.map((e) => e.id));
      const add = page.items.filter((e) => !known.has(e.id));
      this.events = [...this.events, ...add];
      this.extra += add.length;
      this.older = page.next_cursor;
      this.historyError = null;
    } catch (e) {
      this.historyError = errorText(e);
    } finally {
      this.loadingHistory = false;
      this.notify();
    }
  }

  private open(token: string, after: string | null): void {
    this.close = openFeed(
      token,
      new URLSearchParams(),
      {
        onEvent: (ev) => {
          const all = [ev, ...this.events];
          const keep = this.max + this.extra;
          if (all.length > keep) {
            // The oldest go; "load older" reads them again.
            this.events = all.slice(0, keep);
            this.older = this.events[this.events.length - 1]?.id ?? this.older;
          } else this.events = all;
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
      },
      '',
      after,
    );
  }

  stop(): void {
    this.generation++;
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
