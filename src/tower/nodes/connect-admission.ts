// How many node connects a replica handles at once. When a replica dies, its nodes dial the
// survivors within seconds; every connect in flight holds its request, its parser and socket
// buffers, a node lookup and then an agent-status write waiting for the store's pool, and what
// that peak grows stays (V8 keeps the heap it grew, glibc the fragments between what is still
// held): 2 500 channels opened at once left a replica 34–40 KiB per channel larger, opened in
// waves of 100 13.5–16.8 KiB (docs/perf-notes.md, issue 33). So past MAX in flight a connect
// is refused at the door, before any lookup, with 503 and Retry-After: svcd waits that long,
// jittered, and dials again (daemon/tower-client/control.ts).
//
// The gate sits on the server's 'upgrade' event, in front of @fastify/websocket's listener
// (it runs before the route's hooks, authentication included). A connect counts from its
// upgrade request until its WebSocket is open, its refusal sent, or its socket closed.
// Every upgrade refused by its route (401, 403, 503 …), on any path, is closed once its answer
// is sent: no HTTP parser reads that socket any more, and a client that never hung up would
// otherwise hold it open.
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import type { Duplex } from 'node:stream';
import { problemOf, SvcError } from '../../protocol/errors.js';

/** Node connects in flight per replica before more are refused (default). */
export const CONNECTS_IN_FLIGHT = 256;
/** Retry-After of a connect refused because too many are in flight. */
export const CONNECTS_BUSY_RETRY_AFTER_S = 1;

type UpgradeListener = (req: IncomingMessage, socket: Duplex, head: Buffer) => void;

export interface ConnectAdmission {
  /** Connects in flight now. */
  inFlight(): number;
  /** Connects refused since start. */
  refused(): number;
  /** The connect of `req` is done (its WebSocket is open). */
  opened(req: IncomingMessage): void;
}

const kRelease = Symbol('svc.connectAdmission');

/**
 * Ends `socket` once the HTTP answer its upgrade got is sent, when that answer refused it
 * (an upgrade that succeeds answers 101 on the socket itself, never through this response).
 */
function closeWhenRefused(socket: Duplex): void {
  const res = (socket as Duplex & { _httpMessage?: ServerResponse | null })._httpMessage;
  res?.once('finish', () => {
    if (res.statusCode === 101 || socket.destroyed) return;
    socket.on('error', () => {});
    socket.end(() => socket.destroy());
  });
}

/**
 * Puts the gate in front of the 'upgrade' listeners `server` has now (call it after the
 * WebSocket plugin is registered). Upgrades to other paths than `path` pass (closed only once
 * refused). `max` 0: no limit.
 */
export function admitConnects(server: Server, opts: { path: string; max?: number }): ConnectAdmission {
  const max = opts.max ?? CONNECTS_IN_FLIGHT;
  const inner = server.listeners('upgrade') as UpgradeListener[];
  server.removeAllListeners('upgrade');
  let inFlight = 0;
  let refused = 0;
  const busy = new SvcError(
    'unavailable',
    `this replica is taking ${max} node connects at once; retry in ${CONNECTS_BUSY_RETRY_AFTER_S} s`,
    { retryAfter: CONNECTS_BUSY_RETRY_AFTER_S },
  );
  const body = JSON.stringify(problemOf(busy));
  const answer =
    'HTTP/1.1 503 Service Unavailable\r\n' +
    `Retry-After: ${CONNECTS_BUSY_RETRY_AFTER_S}\r\n` +
    'Content-Type: application/problem+json\r\n' +
    `Content-Length: ${Buffer.byteLength(body)}\r\n` +
    'Connection: close\r\n\r\n' +
    body;
  server.on('upgrade', (req: IncomingMessage, socket: Duplex, head: Buffer) => {
    if ((req.url ?? '').split('?', 1)[0] !== opts.path) {
      for (const l of inner) l.call(server, req, socket, head);
      closeWhenRefused(socket);
      return;
    }
    if (max > 0 && inFlight >= max) {
      refused++;
      socket.on('error', () => {});
      // Closed once answered: a client that never hangs up holds no socket here.
      socket.end(answer, () => socket.destroy());
      return;
    }
    inFlight++;
    let done = false;
    const release = () => {
      if (done) return;
      done = true;
      inFlight--;
      socket.off('close', release);
    };
    (req as IncomingMessage & { [kRelease]?: () => void })[kRelease] = release;
    socket.once('close', release);
    for (const l of inner) l.call(server, req, socket, head);
    // Refused (401, 403, 503 …): the connect is over once the answer is sent (and its
    // socket closed after it), or a client that never hangs up could hold every place.
    (socket as Duplex & { _httpMessage?: ServerResponse | null })._httpMessage?.once('finish', release);
    closeWhenRefused(socket);
  });
  return {
    inFlight: () => inFlight,
    refused: () => refused,
    opened(req) {
      const r = req as IncomingMessage & { [kRelease]?: () => void };
      r[kRelease]?.();
      delete r[kRelease];
    },
  };
}
