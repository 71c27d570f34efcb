// The tower's HTTP API as svc sees it: JSON in, JSON out, problem+json turned back into a
// SvcError with the server's code, and connection failures into tower_unreachable.
import { HttpTransportError, isUntrustedCertificate, requestJson } from '../lib/http.js';
import { errorFromProblem, SvcError } from '../protocol/errors.js';
import type { Credentials } from './login-store.js';

export class TowerClient {
  constructor(private readonly creds: Credentials) {}

  get url(): string {
    return this.creds.url;
  }

  get token(): string | null {
    return this.creds.token;
  }

  async request<T>(method: string, path: string, body?: unknown, opts: { auth?: boolean } = {}): Promise<T> {
    if (opts.auth !== false && !this.creds.token) {
      throw new SvcError(
        'unauthenticated',
        'no credential: run "svc login --url URL --token TOKEN", set SVC_TOKEN, or start a local tower with "svc up"',
      );
    }
    let res: Awaited<ReturnType<typeof requestJson>>;
    try {
      res = await requestJson(this.creds.url + path, method, {
        token: opts.auth === false ? null : this.creds.token,
        body,
      });
    } catch (e) {
      if (e instanceof HttpTransportError && isUntrustedCertificate(e.causeCode)) {
        throw new SvcError(
          'tower_unreachable',
          `the tower at ${this.creds.url} presents a certificate this machine does not trust (${e.causeCode}): for a self-signed certificate or a private CA, set NODE_EXTRA_CA_CERTS to its PEM file (docs/operator-guide.md, section 2)`,
        );
      }
      if (e instanceof HttpTransportError) {
        throw new SvcError(
          'tower_unreachable',
          `cannot reach the tower at ${this.creds.url} (${e.causeCode}): is "svc tower serve" running?`,
        );
      }
      throw e;
    }
    if (res.status >= 400) throw errorFromProblem(res.status, res.text);
    return (res.text ? JSON.parse(res.text) : undefined) as T;
  }

  get<T>(path: string): Promise<T> {
    return this.request<T>('GET', path);
  }

  post<T>(path: string, body: unknown = {}): Promise<T> {
    return this.request<T>('POST', path, body);
  }
}

/** Encodes one path segment (ids are opaque). */
export const seg = (s: string): string => encodeURIComponent(s);
