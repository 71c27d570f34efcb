import type { Socket } from 'node:net';
import websocket from '@fastify/websocket';
import Fastify, { type FastifyInstance } from 'fastify';
import { afterEach, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { waitFor } from '../../../test/support/poll.js';
import { releaseUpgrade } from './ws-upgrade.js';

describe('releaseUpgrade', () => {
  let app: FastifyInstance | null = null;
  afterEach(async () => {
    await app?.close();
    app = null;
  });

  it('keeps nothing of the upgrade on the connection, and tells of socket errors without crashing', async () => {
    app = Fastify();
    await app.register(websocket);
    const held: { conn: Socket & { _httpMessage?: unknown }; socket: WebSocket }[] = [];
    const errors: Error[] = [];
    app.get('/ws', { websocket: true }, (socket, req) => {
      const conn = req.raw.socket as Socket & { _httpMessage?: unknown };
      expect(conn._httpMessage).toBeTruthy(); // what the plugin leaves: the upgrade's response
      releaseUpgrade(socket, req, (e) => errors.push(e));
      held.push({ conn, socket });
    });
    const url = (await app.listen({ host: '127.0.0.1', port: 0 })).replace('http', 'ws');
    const client = new WebSocket(`${url}/ws`);
    await new Promise((r, j) => {
      client.once('open', r);
      client.once('error', j);
    });
    await waitFor('the server side', () => held.length === 1);
    const [{ conn, socket }] = held as [(typeof held)[0]];
    expect(conn._httpMessage ?? null).toBeNull();
    expect(socket.listenerCount('error')).toBe(1);
    expect(conn.listenerCount('close')).toBeLessThanOrEqual(1); // ws's own, not the response's

    // A reserved opcode is a protocol error on the server's side: reported, socket closed.
    const closed = new Promise<void>((r) => socket.once('close', () => r()));
    (client as unknown as { _socket: Socket })._socket.write(Buffer.from([0x8f, 0x80, 0, 0, 0, 0]));
    await closed;
    expect(errors.map((e) => e.message)).toEqual([expect.stringMatching(/opcode/i)]);
    client.terminate();
  });
});
