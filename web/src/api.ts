// The console's only way to the tower: same-origin fetch with the token as a Bearer header.
// The token lives in sessionStorage (gone when the tab closes) and never goes into a URL.
// Wire shapes come from src/protocol (type-only imports: nothing of it reaches the bundle).
import type { List } from '../../src/protocol/common.js';
import type { RateLimitBlock } from '../../src/protocol/events.js';

const KEY = 'svc.token';

export function getToken(): string | null {
  return sessionStorage.getItem(KEY);
}

export function setToken(token: string): void {
  sessionStorage.setItem(KEY, token);
}

export function clearToken(): void {
  sessionStorage.removeItem(KEY);
}

/** An API error with the problem+json fields the UI shows. */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    readonly detail: string,
  ) {
    super(detail);
  }
}

/** The text to show for a failed call: the problem's `detail` when the API gave one. */
export function errorText(e: unknown): string {
  if (e instanceof ApiError) return e.status ? `${e.detail} (${e.status} ${e.code})` : e.detail;
  return e instanceof Error ? e.message : String(e);
}

type Listener = () => void;

/** Latest rate-limit state seen by the console (headers of API calls, `rate_limit` of events). */
export const rateLimit = {
  current: null as RateLimitBlock | null,
  listeners: new Set<Listener>(),
  set(r: RateLimitBlock): void {
    this.current = r;
    for (const fn of this.listeners) fn();
  },
  subscribe(fn: Listener): () => void {
    this.listeners.add(fn);
    return () => this.listeners.delete(fn);
  },
};

function noteRateLimit(res: Response): void {
  const limit = Number(res.headers.get('ratelimit-limit'));
  const remaining = Number(res.headers.get('ratelimit-remaining'));
  const reset = Number(res.headers.get('ratelimit-reset'));
  if (!res.headers.has('ratelimit-limit') || !Number.isFinite(limit + remaining + reset)) return;
  rateLimit.set({ limit, remaining, reset_at: new Date(Date.now() + reset * 1000).toISOString() });
}

export async function api<T>(method: string, path: string, body?: unknown, token = getToken()): Promise<T> {
  const headers: Record<string, string> = { accept: 'application/json' };
  if (token) headers.authorization = `Bearer ${token}`;
  if (body !== undefined) headers['content-type'] = 'application/json';
  let res: Response;
  try {
    res = await fetch(path, {
      method,
      headers,
      ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
      credentials: 'omit',
      cache: 'no-store',
    });
  } catch (e) {
    throw new ApiError(0, 'network', `cannot reach the tower: ${(e as Error).message}`);
  }
  noteRateLimit(res);
  const text = await res.text();
  let json: unknown = null;
  try {
    json = text ? JSON.parse(text) : null;
  } catch {
    json = null;
  }
  if (!res.ok) {
    const p = (json ?? {}) as { code?: string; detail?: string; title?: string };
    throw new ApiError(res.status, p.code ?? 'http_error', p.detail ?? p.title ?? `HTTP ${res.status}`);
  }
  return json as T;
}

/** Every page of a list route (small lists in the console; capped to keep the UI responsive). */
export async function listAll<T>(path: string, maxPages = 20): Promise<T[]> {
  const out: T[] = [];
  let cursor: string | null = null;
  for (let i = 0; i < maxPages; i++) {
    const sep = path.includes('?') ? '&' : '?';
    const page: List<T> = await api<List<T>>(
      'GET',
      cursor ? `${path}${sep}cursor=${encodeURIComponent(cursor)}` : path,
    );
    out.push(...page.items);
    cursor = page.next_cursor;
    if (!cursor) break;
  }
  return out;
}
