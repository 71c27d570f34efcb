// The hop between replicas (docs/architecture.md, Many replicas): when what a request needs
// lives on another replica — the node's control channel, a pending attach stream, an attach
// ticket — this replica hands the request to that replica, at the address it registered in
// the store (nodes/presence.ts), with the caller's own credential, and relays the answer: an
// HTTP request as one request on a kept-alive connection, a WebSocket as a second WebSocket
// piped frame for frame. The other replica authenticates and authorizes the caller again,
// exactly as if the caller had reached it, so the hop adds no trust between replicas and
// needs no secret of its own. A forwarded request carries HOP_HEADER with its count of hops, and is handed on at most
// MAX_HOPS times in all (a viewer's ticket to its issuer, then to the node's replica), so a
// moment when replicas disagree about a node cannot make a loop.
import http from 'node:http';
import https from 'node:https';
import type { FastifyReply, FastifyRequest } from 'fastify';
import WebSocket from 'ws';
import { pipeSockets } from '../../lib/ws-pipe.js';
import { type ErrorFrame, TOWER_MAX_FRAME_BYTES } from '../../protocol/attach.js';
import { type ErrorCode, SvcError } from '../../protocol/errors.js';
import type { Holder } from './presence.js';

export const HOP_HEADER = 'x-svc-hop';
export const MAX_HOPS = 2;

/** Hops this request has made between replicas (0: it came from a client). */
export function hops(req: FastifyRequest): number {
  const v = Number(req.headers[HOP_HEADER] ?? 0);
  return Number.isInteger(v) && v >= 0 ? v : MAX_HOPS;
}

/** Whether this request may not be handed to another replica again: answer it here. */
export function forwarded(req: FastifyRequest): boolean {
  return hops(req) >= MAX_HOPS;
}

/** The replica id an owned id embeds (`st_<replica>_…`, `sat_<replica>_…`), or null. */
export function ownerOf(id: string): string | null {
  return /^s(?:a)?t_([0-9a-f]{12})_/.exec(id)?.[1] ?? null;
}

/** Headers a forwarded request keeps: the caller's credential and what the body is. */
function hopHeaders(req: FastifyRequest, authorization: string | undefined): Record<string, string> {
  const h: Record<string, string> = { [HOP_HEADER]: String(hops(req) + 1) };
  if (authorization) h.authorization = authorization;
  const type = req.headers['content-type'];
  if (typeof type === 'string') h['content-type'] = type;
  return h;
}

/**
 * Keep-alive connections to the other replicas, reused by every forwarded request. A free
 * connection is dropped after FREE_SOCKET_MS, well before a replica closes an idle one
 * (Fastify's keep-alive timeout, 72 s), so a request is never sent on a closing connection.
 * node:http rather than fetch: a crossing request made about 40 KiB of garbage in fetch and
 * took twice the CPU, and on a replica holding thousands of channels the young generation's
 * collections are what a request's tail waits for (docs/perf-notes.md).
 */
const FREE_SOCKET_MS = 30_000;
const agents = {
  'http:': new http.Agent({ keepAlive: true, timeout: FREE_SOCKET_MS }),
  'https:': new https.Agent({ keepAlive: true, timeout: FREE_SOCKET_MS }),
};

/** What a replica answered to a forwarded request. */
interface HopAnswer {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: Buffer;
}

/** Sends one request to another replica and reads its whole answer, within `timeoutMs`. */
function hopRequest(
  url: URL,
  init: { method: string; headers: Record<string, string>; body?: string },
  timeoutMs: number,
): Promise<HopAnswer> {
  return new Promise((resolve, reject) => {
    const client = url.protocol === 'https:' ? https : http;
    const req = client.request(url, {
      method: init.method,
      headers:
        init.body === undefined
          ? init.headers
          : { ...init.headers, 'content-length': Buffer.byteLength(init.body) },
      agent: url.protocol === 'https:' ? agents['https:'] : agents['http:'],
    });
    const timer = setTimeout(() => req.destroy(new Error(`no answer within ${timeoutMs} ms`)), timeoutMs);
    req.on('error', (e) => {
      clearTimeout(timer);
      reject(e);
    });
    req.once('response', (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.once('end', () => {
        clearTimeout(timer);
        resolve({ status: res.statusCode ?? 502, headers: res.headers, body: Buffer.concat(chunks) });
      });
      // A connection lost mid-answer (or the deadline) errors the answer too.
      res.on('error', (e) => {
        clearTimeout(timer);
        reject(e);
      });
    });
    req.end(init.body);
  });
}

/**
 * Answers `req` with what the replica at `to` answers to it. Its status, body and the headers
 * a client acts on are relayed; a replica that cannot be reached is node_offline (the node's
 * channel went with it; the node reconnects elsewhere).
 */
export async function forwardRequest(
  to: Holder,
  req: FastifyRequest,
  reply: FastifyReply,
  opts: { timeoutMs: number; what: string },
): Promise<FastifyReply> {
  let res: HopAnswer;
  try {
    res = await hopRequest(
      new URL(`${to.address}${req.url}`),
      {
        method: req.method,
        headers: hopHeaders(req, req.headers.authorization),
        ...(req.body !== undefined && req.method !== 'GET' ? { body: JSON.stringify(req.body) } : {}),
      },
      opts.timeoutMs,
    );
  } catch (e) {
    throw new SvcError(
      'node_offline',
      `${opts.what}: the replica holding it (${to.address}) did not answer (${(e as Error).message}); try again once the node has reconnected`,
    );
  }
  for (const h of ['content-type', 'retry-after'] as const) {
    const v = res.headers[h];
    if (typeof v === 'string') reply.header(h, v);
  }
  return reply.code(res.status).send(res.body);
}

/**
 * Pipes `client` (a WebSocket this replica accepted, paused) to the same path on the replica
 * at `to`, with `authorization` as the credential. If that replica cannot be reached, the
 * client gets `refusal` (an attach error frame) when given, and is closed.
 */
export function forwardSocket(
  to: Holder,
  req: FastifyRequest,
  pathAndQuery: string,
  client: WebSocket,
  opts: { authorization: string; refusal?: { code: ErrorCode; message: string } },
): void {
  const upstream = new WebSocket(`${to.address.replace(/^http/, 'ws')}${pathAndQuery}`, {
    headers: {
      ...(opts.authorization ? { authorization: opts.authorization } : {}),
      [HOP_HEADER]: String(hops(req) + 1),
    },
    perMessageDeflate: false,
    maxPayload: TOWER_MAX_FRAME_BYTES,
    handshakeTimeout: 10_000,
  });
  upstream.pause();
  let opened = false;
  const fail = (why: string) => {
    if (opened) return;
    if (opts.refusal && client.readyState === WebSocket.OPEN) {
      const f: ErrorFrame = {
        type: 'error',
        code: opts.refusal.code,
        message: `${opts.refusal.message} (${why})`,
      };
      client.send(JSON.stringify(f));
    }
    // The client was paused for the hop: read again, or its close frame is never seen.
    client.resume();
    client.close(1011, 'the replica holding this stream cannot be reached');
    upstream.terminate();
  };
  upstream.once('unexpected-response', (_req, res) => fail(`HTTP ${res.statusCode}`));
  upstream.once('error', (e) => fail(e.message));
  client.once('close', () => {
    if (!opened) upstream.terminate();
  });
  upstream.once('open', () => {
    opened = true;
    if (client.readyState !== WebSocket.OPEN) {
      upstream.close(1000, 'client left');
      return;
    }
    pipeSockets(client, upstream, () => {});
  });
}
