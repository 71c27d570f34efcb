// What a long-lived WebSocket keeps of the HTTP upgrade that opened it.
//
// @fastify/websocket routes the upgrade through Fastify with a ServerResponse assigned to
// the connection (the net.Socket's `_httpMessage`), and gives the WebSocket an 'error'
// listener that calls its error handler with the upgrade's request and reply. Between them
// they keep, for as long as the socket lives, the Fastify request and reply, the raw
// IncomingMessage with its headers (the caller's credential among them), the ServerResponse
// and the request's child logger: 3.4 of the 11 KiB of live heap a node control channel
// held (bench/fleet/channel-heap.mjs, 1 000 channels: 11.0 KiB before, 7.6 after).
// Routes whose sockets stay open for hours (node control channels, feed streams) drop both.
// The upgrade's response then never ends, so such a connection is not in the request log or
// the request-latency histogram at its close (its lifetime is no request latency anyway).

import type { ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import type { FastifyRequest } from 'fastify';
import type { WebSocket } from 'ws';

/** The error listener of sockets that have nothing to say of their errors: one for all. */
const ignore = (): void => {};

/**
 * Lets go of the upgrade's request and response: detaches the response from the connection,
 * drops the listeners the upgrade left on `socket` ('error') and installs `onError` instead
 * (ws closes the socket after an error; `onError` only tells). Call it first thing in the
 * route's handler; read what the handler needs from `req` without keeping `req` in closures.
 */
export function releaseUpgrade(
  socket: WebSocket,
  req: FastifyRequest,
  onError: (err: Error) => void = ignore,
): void {
  const conn = req.raw.socket as Socket & { _httpMessage?: ServerResponse | null };
  const res = conn._httpMessage;
  if (res && res.req === req.raw) res.detachSocket(conn);
  socket.removeAllListeners('error');
  socket.on('error', onError);
}
