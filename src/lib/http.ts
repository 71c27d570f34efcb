// JSON over HTTP with fetch: one request, the status and body text back. Transport failures
// (refused, reset, DNS) become HttpTransportError naming the cause; callers map statuses.

export class HttpTransportError extends Error {
  constructor(
    readonly url: string,
    readonly causeCode: string,
  ) {
    super(`cannot reach ${url} (${causeCode})`);
    this.name = 'HttpTransportError';
  }
}

/** Certificate errors a self-signed certificate or a private CA causes (not a wrong name or date). */
const UNTRUSTED_CERT = new Set([
  'DEPTH_ZERO_SELF_SIGNED_CERT',
  'SELF_SIGNED_CERT_IN_CHAIN',
  'UNABLE_TO_VERIFY_LEAF_SIGNATURE',
  'UNABLE_TO_GET_ISSUER_CERT',
  'UNABLE_TO_GET_ISSUER_CERT_LOCALLY',
]);

/** True when a transport failure means: the server's certificate is not trusted here. */
export function isUntrustedCertificate(code: string): boolean {
  return UNTRUSTED_CERT.has(code);
}

export interface HttpResult {
  status: number;
  text: string;
}

export async function requestJson(
  url: string,
  method: string,
  opts: { token?: string | null; body?: unknown; signal?: AbortSignal } = {},
): Promise<HttpResult> {
  const headers: Record<string, string> = { accept: 'application/json' };
  if (opts.token) headers.authorization = `Bearer ${opts.token}`;
  if (opts.body !== undefined) headers['content-type'] = 'application/json';
  let res: Response;
  try {
    res = await fetch(url, {
      method,
      headers,
      ...(opts.body !== undefined ? { body: JSON.stringify(opts.body) } : {}),
      ...(opts.signal ? { signal: opts.signal } : {}),
    });
  } catch (e) {
    if (opts.signal?.aborted) throw e;
    const cause = (e as { cause?: { code?: string; message?: string } }).cause;
    throw new HttpTransportError(url, cause?.code ?? cause?.message ?? (e as Error).message);
  }
  return { status: res.status, text: await res.text() };
}
