// Transport policy shared by every client: plain http only to loopback hosts, unless the
// operator opts in with SVC_ALLOW_INSECURE=1 (development proxies).

const LOOPBACK = new Set(['localhost', '127.0.0.1', '::1', '[::1]']);

export function isLoopbackHost(hostname: string): boolean {
  return LOOPBACK.has(hostname) || hostname.startsWith('127.');
}

/**
 * Returns the normalized base URL (no trailing slash) or throws an Error saying what to do.
 */
export function checkBaseUrl(raw: string, allowInsecure: boolean): string {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new Error(`invalid URL "${raw}": expected e.g. https://tower.example.com or http://127.0.0.1:8008`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    throw new Error(`unsupported URL scheme "${url.protocol}" in "${raw}": use http:// or https://`);
  }
  if (url.protocol === 'http:' && !isLoopbackHost(url.hostname) && !allowInsecure) {
    throw new Error(
      `refusing plain http:// to non-loopback host ${url.hostname}: use https://, or set SVC_ALLOW_INSECURE=1 for a development proxy`,
    );
  }
  return url.toString().replace(/\/+$/, '');
}

export const DEFAULT_BASE_URL = 'http://127.0.0.1:8008';
