// The tower's HTTP API as svc sees it: JSON in, JSON out, problem+json turned back into a
// SvcError with the server's code, and connection failures into tower_unreachable.
import { isErrorCode, type Problem, SvcError } from '../protocol/errors.js';
import type { Credentials } from './credentials.js';

export class TowerClient {
  constructor(private readonly creds: Credentials) {}

  get url(): string {
    return this.creds.url;
  }

  async request<T>(method: string, path: string, body?: unknown, opts: { auth?: boolean } = {}): Promise<T> {
    const headers: Record<string, string> = { accept: 'application/json' };
    if (opts.auth !== false) {
      if (!this.creds.token) {
        throw new SvcError(
          'unauthenticated',
          'no credential: run "svc login --url URL --token TOKEN", set SVC_TOKEN, or start a local tower with "svc up"',
        );
      }
      headers.authorization = `Bearer ${this.creds.token}`;
    }
    if (body !== undefined) headers['content-type'] = 'application/json';
    let res: Response;
    try {
      res = await fetch(this.creds.url + path, {
        method,
        headers,
        ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
      });
    } catch (e) {
      const cause = (e as { cause?: { code?: string; message?: string } }).cause;
      throw new SvcError(
        'tower_unreachable',
        `cannot reach the tower at ${this.creds.url} (${cause?.code ?? cause?.message ?? (e as Error).message}): is "svc tower serve" running?`,
      );
    }
    const text = await res.text();
    if (!res.ok) throw problemToError(res.status, text);
    return (text ? JSON.parse(text) : undefined) as T;
  }

  get<T>(path: string): Promise<T> {
    return this.request<T>('GET', path);
  }

  post<T>(path: string, body: unknown = {}): Promise<T> {
    return this.request<T>('POST', path, body);
  }
}

function problemToError(status: number, text: string): SvcError {
  try {
    const p = JSON.parse(text) as Partial<Problem>;
    if (isErrorCode(p.code)) {
      return new SvcError(
        p.code,
        p.detail ?? p.title ?? `HTTP ${status}`,
        p.errors ? { errors: p.errors } : {},
      );
    }
  } catch {
    // not a problem document; fall through
  }
  return new SvcError(
    status >= 500 ? 'unavailable' : 'bad_request',
    `tower answered HTTP ${status}: ${text.slice(0, 200)}`,
  );
}

/** Encodes one path segment (ids are opaque). */
export const seg = (s: string): string => encodeURIComponent(s);
