import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import type { IncomingMessage } from 'node:http';
import { createServer as createNetServer, type Server, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createSecureContext, createServer as createTlsServer } from 'node:tls';
import { afterEach, describe, expect, it } from 'vitest';
import { type WebSocket, WebSocketServer } from 'ws';
import { waitFor } from '../../test/support/poll.js';
import { sha1 } from './sha1.js';
import { WebSocketClient } from './websocket-client.js';

const closers: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const c of closers.splice(0).reverse()) await c();
});

/** A real `ws` server on port 0; `conns` fills as clients connect. */
async function wsServer(opts: { verify?: (req: IncomingMessage) => boolean } = {}) {
  const conns: { ws: WebSocket; req: IncomingMessage }[] = [];
  const wss = new WebSocketServer({
    port: 0,
    host: '127.0.0.1',
    ...(opts.verify ? { verifyClient: (info: { req: IncomingMessage }) => opts.verify!(info.req) } : {}),
  });
  wss.on('connection', (ws, req) => conns.push({ ws, req }));
  await new Promise<void>((r) => wss.once('listening', () => r()));
  closers.push(
    () =>
      new Promise<void>((r) => {
        for (const c of wss.clients) c.terminate();
        wss.close(() => r());
      }),
  );
  const { port } = wss.address() as { port: number };
  return { url: `ws://127.0.0.1:${port}/nodes/connect?x=1`, conns };
}

async function firstConn(srv: { conns: { ws: WebSocket; req: IncomingMessage }[] }) {
  await waitFor('the server side', () => srv.conns.length === 1);
  return srv.conns[0]!;
}

/** A raw TCP server whose connections the test drives byte by byte. */
async function rawServer(onSocket: (s: Socket, request: string) => void): Promise<string> {
  const server: Server = createNetServer((s) => {
    let head = '';
    s.on('data', (d) => {
      if (head.includes('\r\n\r\n')) return;
      head += d.toString('latin1');
      if (head.includes('\r\n\r\n')) onSocket(s, head);
    });
    s.on('error', () => {});
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const open = new Set<Socket>();
  server.on('connection', (s) => {
    open.add(s);
    s.on('close', () => open.delete(s));
  });
  closers.push(
    () =>
      new Promise<void>((r) => {
        for (const s of open) s.destroy();
        server.close(() => r());
      }),
  );
  return `ws://127.0.0.1:${(server.address() as { port: number }).port}/`;
}

function acceptOf(request: string): string {
  const key = /sec-websocket-key: (\S+)/i.exec(request)?.[1] ?? '';
  return sha1(Buffer.from(`${key}258EAFA5-E914-47DA-95CA-C5AB0DC85B11`)).toString('base64');
}

function upgrade(s: Socket, request: string, extra = ''): void {
  s.write(
    `HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: ${acceptOf(request)}\r\n${extra}\r\n`,
  );
}

/** Records a client's events in order. */
function record(c: WebSocketClient) {
  const events: string[] = [];
  const messages: { data: Buffer; binary: boolean }[] = [];
  let closed: { code: number; reason: string } | null = null;
  const errors: string[] = [];
  c.on('open', () => events.push('open'));
  c.on('message', (data, binary) => {
    events.push('message');
    messages.push({ data, binary });
  });
  c.on('error', (e) => {
    events.push('error');
    errors.push(e.message);
  });
  c.on('close', (code, reason) => {
    events.push('close');
    closed = { code, reason: reason.toString() };
  });
  closers.push(() => c.terminate());
  return { events, messages, errors, closed: () => closed as { code: number; reason: string } | null };
}

/** A client connected to a fresh ws server: the client, its recorded events, the server side. */
async function openPair() {
  const srv = await wsServer();
  const c = new WebSocketClient(srv.url);
  const r = record(c);
  const { ws } = await firstConn(srv);
  await waitFor('open', () => c.readyState === WebSocketClient.OPEN);
  return { c, r, ws };
}

describe('WebSocketClient against a ws server', () => {
  it('opens with the extra headers and exchanges text and binary messages both ways', async () => {
    const srv = await wsServer();
    const c = new WebSocketClient(srv.url, { headers: { authorization: 'Bearer abc' } });
    const r = record(c);
    await waitFor('open', () => c.readyState === WebSocketClient.OPEN);
    const { ws, req } = await firstConn(srv);
    expect(req.headers.authorization).toBe('Bearer abc');
    expect(req.url).toBe('/nodes/connect?x=1');
    const got: { data: string; binary: boolean }[] = [];
    ws.on('message', (d, binary) => got.push({ data: String(d), binary }));
    c.send('héllo');
    c.send(Buffer.from([1, 2, 3]));
    const big = 'x'.repeat(70_000); // a 64-bit length
    const mid = 'y'.repeat(300); // a 16-bit length
    c.send(big);
    c.send(mid);
    await waitFor('server got 4', () => got.length === 4);
    expect(got).toEqual([
      { data: 'héllo', binary: false },
      { data: '\u0001\u0002\u0003', binary: true },
      { data: big, binary: false },
      { data: mid, binary: false },
    ]);
    ws.send('from server');
    ws.send(Buffer.from([9, 8]));
    ws.send(big);
    await waitFor('client got 3', () => r.messages.length === 3);
    expect(r.messages.map((m) => [m.data.toString(), m.binary])).toEqual([
      ['from server', false],
      ['\t\b', true],
      [big, false],
    ]);
  });

  it('reassembles a fragmented message', async () => {
    const { r, ws } = await openPair();
    ws.send('one ', { fin: false });
    ws.send('two ', { fin: false });
    ws.send('three', { fin: true });
    await waitFor('message', () => r.messages.length === 1);
    expect(r.messages[0]!.data.toString()).toBe('one two three');
  });

  it('answers pings with pongs and gets pongs for its pings', async () => {
    const srv = await wsServer();
    const c = new WebSocketClient(srv.url);
    const pings: string[] = [];
    const pongs: string[] = [];
    c.on('ping', (d) => pings.push(d.toString()));
    c.on('pong', (d) => pongs.push(d.toString()));
    record(c);
    const { ws } = await firstConn(srv);
    await waitFor('open', () => c.readyState === WebSocketClient.OPEN);
    const serverPongs: string[] = [];
    ws.on('pong', (d) => serverPongs.push(d.toString()));
    ws.ping('p1');
    await waitFor('pong at the server', () => serverPongs.length === 1);
    expect(serverPongs).toEqual(['p1']);
    expect(pings).toEqual(['p1']);
    c.ping();
    await waitFor('pong at the client', () => pongs.length === 1);
  });

  it('reports the code and reason the server closes with, and echoes the close', async () => {
    const { c, r, ws } = await openPair();
    let serverClose: number | null = null;
    ws.on('close', (code) => {
      serverClose = code;
    });
    ws.close(1008, 'node revoked');
    await waitFor('closed', () => r.closed());
    expect(r.closed()).toEqual({ code: 1008, reason: 'node revoked' });
    expect(c.readyState).toBe(WebSocketClient.CLOSED);
    await waitFor('server closed', () => serverClose);
    expect(serverClose).toBe(1008);
    expect(r.events).toEqual(['open', 'close']);
  });

  it('closes with the code and reason it is given', async () => {
    const { c, r, ws } = await openPair();
    let serverClose: { code: number; reason: string } | null = null;
    ws.on('close', (code, reason) => {
      serverClose = { code, reason: reason.toString() };
    });
    c.close(1001, 'svcd stopping');
    expect(c.readyState).toBe(WebSocketClient.CLOSING);
    await waitFor('closed', () => r.closed());
    expect(r.closed()).toEqual({ code: 1001, reason: 'svcd stopping' });
    await waitFor('server closed', () => serverClose);
    expect(serverClose).toEqual({ code: 1001, reason: 'svcd stopping' });
  });

  it('terminate drops the connection without a closing handshake', async () => {
    const { c, r, ws } = await openPair();
    let serverClose: number | null = null;
    ws.on('close', (code) => {
      serverClose = code;
    });
    c.terminate();
    await waitFor('closed', () => r.closed());
    expect(r.closed()?.code).toBe(1006);
    await waitFor('server closed', () => serverClose);
    expect(serverClose).toBe(1006);
  });

  it('emits unexpected-response with the status when the upgrade is refused', async () => {
    const srv = await wsServer({ verify: () => false });
    const c = new WebSocketClient(srv.url);
    const statuses: number[] = [];
    c.on('unexpected-response', (s) => {
      statuses.push(s);
      c.terminate();
    });
    const r = record(c);
    await waitFor('closed', () => r.closed());
    expect(statuses).toEqual([401]);
    expect(r.closed()?.code).toBe(1006);
  });

  it('without an unexpected-response listener a refused upgrade is an error', async () => {
    const srv = await wsServer({ verify: () => false });
    const r = record(new WebSocketClient(srv.url));
    await waitFor('closed', () => r.closed());
    expect(r.errors).toEqual(['Unexpected server response: 401']);
    expect(r.events).toEqual(['error', 'close']);
  });

  it('closes with 1009 when a message is over maxPayload, fragments counted together', async () => {
    const srv = await wsServer();
    const c = new WebSocketClient(srv.url, { maxPayload: 1000 });
    const r = record(c);
    const { ws } = await firstConn(srv);
    await waitFor('open', () => c.readyState === WebSocketClient.OPEN);
    let serverClose: number | null = null;
    ws.on('close', (code) => {
      serverClose = code;
    });
    ws.send('a'.repeat(1000));
    await waitFor('the allowed one', () => r.messages.length === 1);
    ws.send('b'.repeat(600), { fin: false });
    ws.send('b'.repeat(600), { fin: true });
    await waitFor('closed', () => r.closed());
    expect(r.errors).toEqual(['Max payload size exceeded']);
    expect(r.messages).toHaveLength(1);
    await waitFor('server closed', () => serverClose);
    expect(serverClose).toBe(1009);
  });

  it('reports a refused connection as error then close 1006', async () => {
    const srv = await rawServer(() => {});
    const port = new URL(srv).port;
    // Free the port: nothing listens there any more.
    for (const c of closers.splice(0)) await c();
    const r = record(new WebSocketClient(`ws://127.0.0.1:${port}/`));
    await waitFor('closed', () => r.closed());
    expect(r.errors[0]).toMatch(/ECONNREFUSED/);
    expect(r.events).toEqual(['error', 'close']);
    expect(r.closed()?.code).toBe(1006);
  });
});

describe('WebSocketClient against a misbehaving server', () => {
  it('times out a handshake the server never answers', async () => {
    const url = await rawServer(() => {});
    const r = record(new WebSocketClient(url, { handshakeTimeoutMs: 200 }));
    await waitFor('closed', () => r.closed());
    expect(r.errors).toEqual(['Opening handshake has timed out']);
    expect(r.events).toEqual(['error', 'close']);
  });

  it('refuses a 101 with a wrong Sec-WebSocket-Accept', async () => {
    const url = await rawServer((s) =>
      s.write(
        'HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: bm9wZQ==\r\n\r\n',
      ),
    );
    const r = record(new WebSocketClient(url));
    await waitFor('closed', () => r.closed());
    expect(r.errors).toEqual(['Invalid Sec-WebSocket-Accept header']);
    expect(r.events).toEqual(['error', 'close']);
  });

  it('refuses an extension it did not ask for', async () => {
    const url = await rawServer((s, req) =>
      upgrade(s, req, 'Sec-WebSocket-Extensions: permessage-deflate\r\n'),
    );
    const r = record(new WebSocketClient(url));
    await waitFor('closed', () => r.closed());
    expect(r.errors).toEqual(['Server sent a Sec-WebSocket-Extensions header']);
  });

  it('takes frames that arrive in the same packet as the 101, and split across packets', async () => {
    const url = await rawServer((s, req) => {
      upgrade(s, req);
      // "hi" in one write with the head would be the same; here the next frame is split.
      s.write(Buffer.from([0x81, 0x02, 0x68, 0x69, 0x81]));
      setImmediate(() => s.write(Buffer.from([0x03, 0x61, 0x62, 0x63])));
    });
    const r = record(new WebSocketClient(url));
    await waitFor('two messages', () => r.messages.length === 2);
    expect(r.messages.map((m) => m.data.toString())).toEqual(['hi', 'abc']);
  });

  it('masks every frame it sends', async () => {
    const frames: Buffer[] = [];
    const url = await rawServer((s, req) => {
      upgrade(s, req);
      s.on('data', (d) => frames.push(d));
    });
    const c = new WebSocketClient(url);
    record(c);
    await waitFor('open', () => c.readyState === WebSocketClient.OPEN);
    c.send('abcd');
    await waitFor('frame', () => frames.length > 0);
    const f = Buffer.concat(frames);
    expect(f[0]).toBe(0x81);
    expect(f[1]).toBe(0x80 | 4);
    const mask = f.subarray(2, 6);
    const text = Buffer.from(f.subarray(6, 10).map((b, i) => b ^ mask[i & 3]!));
    expect(text.toString()).toBe('abcd');
  });

  for (const [what, frame, code] of [
    ['a masked frame', [0x81, 0x82, 1, 2, 3, 4, 0, 0], 1002],
    ['RSV bits', [0xc1, 0x00], 1002],
    ['an unknown opcode', [0x83, 0x00], 1002],
    ['a fragmented ping', [0x09, 0x00], 1002],
    ['invalid UTF-8 in a text message', [0x81, 0x02, 0xc3, 0x28], 1007],
    ['a continuation without a message', [0x80, 0x00], 1002],
  ] as const) {
    it(`closes with ${code} on ${what}`, async () => {
      const frames: Buffer[] = [];
      const url = await rawServer((s, req) => {
        upgrade(s, req);
        s.on('data', (d) => frames.push(d));
        s.write(Buffer.from(frame));
      });
      const r = record(new WebSocketClient(url));
      await waitFor('closed', () => r.closed());
      expect(r.errors).toHaveLength(1);
      expect(r.closed()?.code).toBe(1006);
      // The close frame it sent: opcode 8, masked, the code.
      const f = Buffer.concat(frames);
      expect(f[0]).toBe(0x88);
      const mask = f.subarray(2, 6);
      expect(((f[6]! ^ mask[0]!) << 8) | (f[7]! ^ mask[1]!)).toBe(code);
    });
  }

  it('refuses header values that would split the request', () => {
    expect(
      () => new WebSocketClient('ws://127.0.0.1:1/', { headers: { authorization: 'a\r\nx: y' } }),
    ).toThrow(TypeError);
    expect(() => new WebSocketClient('http://127.0.0.1:1/')).toThrow(SyntaxError);
  });
});

const hasOpenssl = (() => {
  try {
    execFileSync('openssl', ['version'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
})();

describe('WebSocketClient over TLS', () => {
  it.skipIf(!hasOpenssl)('speaks TLS for wss:// with SNI and verifies the certificate', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'wsc-tls-'));
    closers.push(() => rmSync(dir, { recursive: true, force: true }));
    execFileSync(
      'openssl',
      ['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-days', '1', '-subj', '/CN=localhost'].concat([
        '-keyout',
        join(dir, 'key.pem'),
        '-out',
        join(dir, 'cert.pem'),
      ]),
      { stdio: 'ignore' },
    );
    const key = readFileSync(join(dir, 'key.pem'));
    const cert = readFileSync(join(dir, 'cert.pem'));
    const servernames: string[] = [];
    const server = createTlsServer({
      key,
      cert,
      SNICallback: (name, cb) => {
        servernames.push(name);
        cb(null, createSecureContext({ key, cert }));
      },
    });
    server.on('tlsClientError', () => {});
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    closers.push(() => new Promise<void>((r) => server.close(() => r())));
    const { port } = server.address() as { port: number };
    // localhost resolves to 127.0.0.1 here; the self-signed certificate is not trusted.
    const r = record(new WebSocketClient(`wss://localhost:${port}/`));
    await waitFor('closed', () => r.closed());
    expect(r.errors[0]).toMatch(/self[- ]signed/i);
    expect(r.closed()?.code).toBe(1006);
    expect(servernames).toEqual(['localhost']);
  });
});
