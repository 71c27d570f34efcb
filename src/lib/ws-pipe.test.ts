// pipeSockets over real loopback WebSockets: frames cross both ways as they were sent, a
// close on one side closes the other, and an abnormal end of the node's side reaches the
// viewer as a last text frame.
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import WebSocket, { WebSocketServer } from 'ws';
import { waitFor } from '../../test/support/poll.js';
import { pipeSockets } from './ws-pipe.js';

const servers: Server[] = [];
const sockets: WebSocket[] = [];
afterEach(async () => {
  for (const s of sockets.splice(0)) s.terminate();
  await Promise.all(servers.splice(0).map((s) => new Promise((r) => s.close(r))));
});

/** A connected pair: `server` is the tower's end, `client` the remote peer. */
async function pair(): Promise<{ server: WebSocket; client: WebSocket }> {
  const http = createServer();
  servers.push(http);
  const wss = new WebSocketServer({ server: http });
  await new Promise<void>((r) => http.listen(0, '127.0.0.1', () => r()));
  const got = new Promise<WebSocket>((r) => wss.once('connection', r));
  const client = new WebSocket(`ws://127.0.0.1:${(http.address() as AddressInfo).port}`);
  await new Promise((r) => client.once('open', r));
  const server = await got;
  sockets.push(client, server);
  return { server, client };
}

function record(ws: WebSocket): { frames: [string, boolean][]; closed: Promise<number> } {
  const frames: [string, boolean][] = [];
  ws.on('message', (d, bin) => frames.push([d.toString(), bin]));
  return { frames, closed: new Promise((r) => ws.once('close', (c) => r(c))) };
}

describe('pipeSockets', () => {
  it('carries binary and text frames both ways as sent', async () => {
    const viewer = await pair();
    const node = await pair();
    const closes: number[] = [];
    pipeSockets(viewer.server, node.server, (c) => closes.push(c));
    const atNode = record(node.client);
    const atViewer = record(viewer.client);
    viewer.client.send(Buffer.from('typed'), { binary: true });
    viewer.client.send('{"type":"resize","cols":80,"rows":24}');
    node.client.send(Buffer.from('output'), { binary: true });
    await waitFor('both directions', () => atNode.frames.length === 2 && atViewer.frames.length === 1);
    expect(atNode.frames).toEqual([
      ['typed', true],
      ['{"type":"resize","cols":80,"rows":24}', false],
    ]);
    expect(atViewer.frames).toEqual([['output', true]]);
    viewer.client.close(1000);
    expect(await atNode.closed).toBe(1000);
    expect(closes).toEqual([1000]);
  });

  it('tells the viewer when the node side ends abnormally', async () => {
    const viewer = await pair();
    const node = await pair();
    pipeSockets(
      viewer.server,
      node.server,
      () => {},
      (code) => JSON.stringify({ type: 'error', code }),
    );
    const atViewer = record(viewer.client);
    node.client.terminate();
    expect(await atViewer.closed).toBe(1011);
    expect(atViewer.frames).toEqual([['{"type":"error","code":1006}', false]]);
  });

  it('says nothing more after a normal close or an error frame of the node', async () => {
    for (const code of [1000, 1001, 4404]) {
      const viewer = await pair();
      const node = await pair();
      pipeSockets(
        viewer.server,
        node.server,
        () => {},
        () => 'unexpected',
      );
      const atViewer = record(viewer.client);
      node.client.close(code);
      expect(await atViewer.closed).toBe(code);
      expect(atViewer.frames).toEqual([]);
    }
  });
});
