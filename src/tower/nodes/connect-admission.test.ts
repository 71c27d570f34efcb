// The gate in front of node connects: past MAX in flight, 503 with Retry-After before the
// upgrade's own listener runs; a connect leaves the count when its WebSocket opens or its
// socket closes. The tower's wiring: test/e2e (every fleet test connects through it).
import { createServer, type IncomingMessage, type Server, ServerResponse } from 'node:http';
import { type AddressInfo, connect, type Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import { afterEach, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { waitFor } from '../../../test/support/poll.js';
import { admitConnects, CONNECTS_BUSY_RETRY_AFTER_S } from './connect-admission.js';

describe('admitConnects', () => {
  let server: Server | null = null;
  const clients: WebSocket[] = [];
  const sockets: Duplex[] = [];
  afterEach(async () => {
    for (const c of clients.splice(0)) c.terminate();
    // Upgraded sockets are not the HTTP server's to close.
    for (const s of sockets.splice(0)) s.destroy();
    await new Promise((r) => server?.close(r));
    server = null;
  });

  /** A server whose upgrade listener holds each upgrade until told to refuse or close it. */
  async function start(max: number) {
    server = createServer();
    const held: { req: IncomingMessage; socket: Duplex }[] = [];
    server.on('upgrade', (req, socket) => {
      held.push({ req, socket });
      sockets.push(socket);
    });
    const gate = admitConnects(server, { path: '/nodes/connect', max });
    await new Promise<void>((r) => server?.listen(0, '127.0.0.1', r));
    const port = (server.address() as AddressInfo).port;
    return { gate, held, url: (path: string) => `ws://127.0.0.1:${port}${path}` };
  }

  /** Dials `url`; resolves with the refusal (status, Retry-After, problem code) if any. */
  function dial(url: string) {
    const ws = new WebSocket(url);
    clients.push(ws);
    ws.on('error', () => {});
    return new Promise<{ status: number; retryAfter: string | undefined; code: string }>((resolve) => {
      ws.once('unexpected-response', (_req, res) => {
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (d: string) => {
          body += d;
        });
        res.on('end', () =>
          resolve({
            status: res.statusCode ?? 0,
            retryAfter: res.headers['retry-after'] as string | undefined,
            code: (JSON.parse(body) as { code: string }).code,
          }),
        );
      });
    });
  }

  it('refuses connects past the limit at the door, and takes them again as earlier ones finish', async () => {
    const { gate, held, url } = await start(2);
    void dial(url('/nodes/connect'));
    void dial(url('/nodes/connect?x=1'));
    await waitFor('two connects in flight', () => held.length === 2);
    expect(gate.inFlight()).toBe(2);

    expect(await dial(url('/nodes/connect'))).toEqual({
      status: 503,
      retryAfter: String(CONNECTS_BUSY_RETRY_AFTER_S),
      code: 'unavailable',
    });
    expect(held).toHaveLength(2); // the refused one never reached the listener behind the gate
    expect(gate.refused()).toBe(1);

    // Other paths pass whatever the count.
    void dial(url('/events/ws'));
    await waitFor('the other path', () => held.length === 3);
    expect(gate.inFlight()).toBe(2);

    // One opened (its WebSocket is up), one closed: both leave the count, once each.
    const [first, second] = held as [(typeof held)[0], (typeof held)[0]];
    gate.opened(first.req);
    gate.opened(first.req);
    second.socket.destroy();
    await waitFor('the closed one to leave', () => gate.inFlight() === 0);
    first.socket.destroy();
    await new Promise((r) => setImmediate(r));
    expect(gate.inFlight()).toBe(0);

    void dial(url('/nodes/connect'));
    await waitFor('a new connect', () => held.length === 4);
    expect(gate.inFlight()).toBe(1);
  });

  it('closes a connect it refuses once the answer is sent, though the client never hangs up', async () => {
    const { url, held } = await start(1);
    void dial(url('/nodes/connect'));
    await waitFor('a connect in flight', () => held.length === 1);
    const refusedSockets: Duplex[] = [];
    // Listeners added after the gate see every upgrade, refused ones included.
    server?.on('upgrade', (_req, socket) => refusedSockets.push(socket));
    const { port } = new URL(url('/'));
    const client = connect({ host: '127.0.0.1', port: Number(port), allowHalfOpen: true });
    sockets.push(client);
    let answer = '';
    client.setEncoding('utf8');
    client.on('data', (d: string) => {
      answer += d;
    });
    client.write(
      'GET /nodes/connect HTTP/1.1\r\nhost: x\r\nconnection: Upgrade\r\nupgrade: websocket\r\n' +
        'sec-websocket-version: 13\r\nsec-websocket-key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n',
    );
    await waitFor('the answer', () => answer.includes('"code":"unavailable"'));
    expect(answer.startsWith('HTTP/1.1 503')).toBe(true);
    await waitFor('the refused socket to be closed', () => refusedSockets[0]?.destroyed === true);
  });

  it('lets a refused connect go once its refusal is sent, though its client keeps the socket open', async () => {
    server = createServer();
    const refusals: ServerResponse[] = [];
    // As @fastify/websocket does: a response assigned to the upgrade's socket, which the
    // route answers (here: later, by hand) unless the upgrade succeeds.
    server.on('upgrade', (req, socket) => {
      sockets.push(socket);
      const res = new ServerResponse(req);
      res.assignSocket(socket as Socket);
      refusals.push(res);
    });
    const gate = admitConnects(server, { path: '/nodes/connect', max: 1 });
    await new Promise<void>((r) => server?.listen(0, '127.0.0.1', r));
    const url = `ws://127.0.0.1:${(server.address() as AddressInfo).port}/nodes/connect`;
    const first = dial(url);
    await waitFor('the connect in flight', () => refusals.length === 1);
    expect((await dial(url)).status).toBe(503);
    (refusals[0] as ServerResponse)
      .writeHead(401, { 'content-type': 'application/json' })
      .end('{"code":"x"}');
    expect((await first).status).toBe(401);
    await waitFor('the refused connect to leave', () => gate.inFlight() === 0);
    // And its socket is closed: no parser reads it any more, the client would keep it forever.
    await waitFor(
      'the refused socket to be closed',
      () => (refusals[0] as ServerResponse).socket === null || sockets[0]?.destroyed === true,
    );
    expect(sockets[0]?.destroyed).toBe(true);
    void dial(url);
    await waitFor('the next connect', () => refusals.length === 2);

    // An upgrade of another path refused by its route is closed the same way.
    const other = dial(url.replace('/nodes/connect', '/events/ws'));
    await waitFor('the other upgrade', () => refusals.length === 3);
    (refusals[2] as ServerResponse)
      .writeHead(403, { 'content-type': 'application/json' })
      .end('{"code":"forbidden"}');
    expect((await other).status).toBe(403);
    await waitFor('the other refused socket to be closed', () => sockets[2]?.destroyed === true);
  });
});
