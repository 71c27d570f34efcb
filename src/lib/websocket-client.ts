// A minimal WebSocket client (RFC 6455) for svcd's control channel to the tower: the opening
// handshake with extra headers (the node JWT), masked text/binary/ping/pong/close frames,
// fragmented messages, a payload cap. No extensions, no subprotocols, no redirects. It exists
// because `ws` loads node:http, https, tls, zlib and crypto at import time, ≈2.3 MiB of RSS an idle
// daemon keeps for nothing (docs/perf-notes.md, daemon); node:tls is loaded only for wss:// URLs.
// The API follows `ws` (events open/message/ping/pong/close/error/unexpected-response).
import { isUtf8 } from 'node:buffer';
import { EventEmitter } from 'node:events';
import { createConnection, isIP, type Socket } from 'node:net';
import { randomBytes } from './random.js';
import { sha1 } from './sha1.js';

const GUID = '258EAFA5-E914-47DA-95CA-C5AB0DC85B11';
/** Largest response head accepted before the 101 is complete. */
const MAX_HEAD_BYTES = 16 * 1024;
/** Time the server has to close the TCP connection after the closing handshake (as ws). */
const CLOSE_TIMEOUT_MS = 30_000;

const OP_CONTINUATION = 0x0;
const OP_TEXT = 0x1;
const OP_BINARY = 0x2;
const OP_CLOSE = 0x8;
const OP_PING = 0x9;
const OP_PONG = 0xa;

export interface WebSocketClientOptions {
  /** Extra request headers (e.g. authorization). */
  headers?: Record<string, string>;
  /** Time for the TCP/TLS connect and the opening handshake (default 10 s). */
  handshakeTimeoutMs?: number;
  /** Largest message accepted, in bytes (default 100 MiB, as ws); bigger closes with 1009. */
  maxPayload?: number;
}

export interface WebSocketClientEvents {
  open: [];
  message: [data: Buffer, isBinary: boolean];
  ping: [data: Buffer];
  pong: [data: Buffer];
  /** Once, last: 1005 when the close frame had no code, 1006 when there was none. */
  close: [code: number, reason: Buffer];
  error: [err: Error];
  /** The server answered the upgrade with another status; without a listener this is an error. */
  'unexpected-response': [statusCode: number];
}

class ProtocolError extends Error {
  constructor(
    message: string,
    readonly closeCode: number,
  ) {
    super(message);
  }
}

export class WebSocketClient extends EventEmitter<WebSocketClientEvents> {
  static readonly CONNECTING = 0;
  static readonly OPEN = 1;
  static readonly CLOSING = 2;
  static readonly CLOSED = 3;

  readyState = WebSocketClient.CONNECTING;
  private socket: Socket | null = null;
  private readonly key = randomBytes(16).toString('base64');
  private readonly maxPayload: number;
  private handshakeTimer: NodeJS.Timeout | null = null;
  private closeTimer: NodeJS.Timeout | null = null;
  private head: Buffer | null = Buffer.alloc(0);
  private buf: Buffer = Buffer.alloc(0);
  /** A fragmented message being received: its opcode and parts. */
  private fragments: { opcode: number; parts: Buffer[]; bytes: number } | null = null;
  private closeFrameSent = false;
  private closeFrameReceived = false;
  private closeCode = 1006;
  private closeReason: Buffer = Buffer.alloc(0);
  private closeEmitted = false;
  /** The error of a failed handshake, emitted (once) before close. */
  private pendingError: Error | null = null;

  constructor(
    url: string,
    private readonly opts: WebSocketClientOptions = {},
  ) {
    super();
    this.maxPayload = opts.maxPayload ?? 100 * 1024 * 1024;
    const u = new URL(url);
    if (u.protocol !== 'ws:' && u.protocol !== 'wss:')
      throw new SyntaxError(`not a ws:// or wss:// URL: ${url}`);
    for (const [k, v] of Object.entries(opts.headers ?? {})) {
      if (/[\r\n]/.test(k) || /[\r\n]/.test(v)) throw new TypeError(`invalid header ${JSON.stringify(k)}`);
    }
    this.handshakeTimer = setTimeout(
      () => this.fail(new Error('Opening handshake has timed out')),
      opts.handshakeTimeoutMs ?? 10_000,
    );
    void this.connect(u).catch((e: Error) => this.fail(e));
  }

  private async connect(u: URL): Promise<void> {
    const host = u.hostname.replace(/^\[(.*)\]$/, '$1');
    const secure = u.protocol === 'wss:';
    const port = Number(u.port || (secure ? 443 : 80));
    let socket: Socket;
    if (secure) {
      const tls = await import('node:tls');
      if (this.readyState !== WebSocketClient.CONNECTING) return;
      socket = tls.connect({ host, port, ...(isIP(host) ? {} : { servername: host }) });
    } else {
      socket = createConnection({ host, port });
    }
    this.socket = socket;
    socket.setNoDelay(true);
    const request = [
      `GET ${u.pathname}${u.search} HTTP/1.1`,
      `Host: ${u.host}`,
      'Upgrade: websocket',
      'Connection: Upgrade',
      `Sec-WebSocket-Key: ${this.key}`,
      'Sec-WebSocket-Version: 13',
      ...Object.entries(this.opts.headers ?? {}).map(([k, v]) => `${k}: ${v}`),
      '',
      '',
    ].join('\r\n');
    socket.once(secure ? 'secureConnect' : 'connect', () => socket.write(request));
    socket.on('data', (chunk: Buffer) => this.onData(chunk));
    socket.on('error', (e) => {
      if (this.readyState !== WebSocketClient.CLOSED) this.emit('error', e);
    });
    socket.on('close', () => this.onSocketClose());
  }

  /** Sends a text (string) or binary (Buffer) message; cb once written (or with the error). */
  send(data: string | Buffer, cb?: (err?: Error | null) => void): void {
    if (this.readyState === WebSocketClient.CONNECTING)
      throw new Error('WebSocket is not open: readyState 0 (CONNECTING)');
    if (this.readyState !== WebSocketClient.OPEN) {
      const err = new Error(`WebSocket is not open: readyState ${this.readyState}`);
      if (cb) process.nextTick(cb, err);
      return;
    }
    const binary = typeof data !== 'string';
    this.writeFrame(binary ? OP_BINARY : OP_TEXT, binary ? data : Buffer.from(data), cb);
  }

  ping(data: Buffer = Buffer.alloc(0)): void {
    if (this.readyState === WebSocketClient.OPEN) this.writeFrame(OP_PING, data);
  }

  /** Starts the closing handshake (before open: drops the connection, as terminate). */
  close(code?: number, reason = ''): void {
    if (this.readyState === WebSocketClient.CLOSED) return;
    if (this.readyState === WebSocketClient.CONNECTING) {
      this.fail(new Error('WebSocket was closed before the connection was established'));
      return;
    }
    if (this.closeFrameSent) return;
    this.readyState = WebSocketClient.CLOSING;
    this.sendClose(code, reason);
    if (this.closeFrameReceived) this.socket?.end();
    this.closeTimer = setTimeout(() => this.socket?.destroy(), CLOSE_TIMEOUT_MS);
  }

  /** Drops the connection at once (no closing handshake). */
  terminate(): void {
    if (this.readyState === WebSocketClient.CLOSED) return;
    if (this.readyState === WebSocketClient.CONNECTING) {
      this.fail(new Error('WebSocket was closed before the connection was established'));
      return;
    }
    this.readyState = WebSocketClient.CLOSING;
    this.socket?.destroy();
  }

  private sendClose(code: number | undefined, reason: string): void {
    this.closeFrameSent = true;
    let payload = Buffer.alloc(0);
    if (code !== undefined) {
      const r = Buffer.from(reason);
      payload = Buffer.alloc(2 + r.length);
      payload.writeUInt16BE(code, 0);
      r.copy(payload, 2);
    }
    this.writeFrame(OP_CLOSE, payload);
  }

  private writeFrame(opcode: number, payload: Buffer, cb?: (err?: Error | null) => void): void {
    const len = payload.length;
    const headLen = len < 126 ? 2 : len < 65536 ? 4 : 10;
    const frame = Buffer.allocUnsafe(headLen + 4 + len);
    frame[0] = 0x80 | opcode;
    if (len < 126) {
      frame[1] = 0x80 | len;
    } else if (len < 65536) {
      frame[1] = 0x80 | 126;
      frame.writeUInt16BE(len, 2);
    } else {
      frame[1] = 0x80 | 127;
      frame.writeUInt32BE(Math.floor(len / 0x100000000), 2);
      frame.writeUInt32BE(len >>> 0, 6);
    }
    const mask = randomBytes(4);
    mask.copy(frame, headLen);
    const body = headLen + 4;
    for (let i = 0; i < len; i++) frame[body + i] = payload[i]! ^ mask[i & 3]!;
    this.socket?.write(frame, cb);
  }

  private onData(chunk: Buffer): void {
    if (this.head) {
      this.head = Buffer.concat([this.head, chunk]);
      const end = this.head.indexOf('\r\n\r\n');
      if (end < 0) {
        if (this.head.length > MAX_HEAD_BYTES)
          this.fail(new Error('Invalid server response: head too large'));
        return;
      }
      const head = this.head.subarray(0, end).toString('latin1');
      const rest = this.head.subarray(end + 4);
      this.head = null;
      if (!this.onHandshake(head)) return;
      if (rest.length === 0) return;
      chunk = rest;
    }
    this.buf = this.buf.length === 0 ? chunk : Buffer.concat([this.buf, chunk]);
    try {
      while (this.socket && !this.socket.destroyed && this.parseFrame()) {}
    } catch (e) {
      if (!(e instanceof ProtocolError)) throw e;
      this.protocolError(e);
    }
  }

  /** Checks the 101; false (and the connection dropped) when it is not a valid upgrade. */
  private onHandshake(head: string): boolean {
    const [statusLine = '', ...lines] = head.split('\r\n');
    const status = /^HTTP\/1\.1 (\d{3})/.exec(statusLine);
    if (!status) {
      this.fail(new Error('Invalid server response'));
      return false;
    }
    const code = Number(status[1]);
    if (code !== 101) {
      this.clearHandshakeTimer();
      if (this.listenerCount('unexpected-response') > 0) {
        this.emit('unexpected-response', code);
        // The listener decides (terminate); otherwise drop it here.
        if (this.readyState === WebSocketClient.CONNECTING)
          this.fail(new Error(`Unexpected server response: ${code}`));
      } else {
        this.fail(new Error(`Unexpected server response: ${code}`));
      }
      return false;
    }
    const headers = new Map<string, string>();
    for (const l of lines) {
      const i = l.indexOf(':');
      if (i > 0) headers.set(l.slice(0, i).trim().toLowerCase(), l.slice(i + 1).trim());
    }
    const accept = sha1(Buffer.from(this.key + GUID)).toString('base64');
    let bad: string | null = null;
    if (headers.get('upgrade')?.toLowerCase() !== 'websocket') bad = 'Invalid Upgrade header';
    else if (!/(^|,)\s*upgrade\s*(,|$)/i.test(headers.get('connection') ?? ''))
      bad = 'Invalid Connection header';
    else if (headers.get('sec-websocket-accept') !== accept) bad = 'Invalid Sec-WebSocket-Accept header';
    else if (headers.has('sec-websocket-extensions')) bad = 'Server sent a Sec-WebSocket-Extensions header';
    else if (headers.has('sec-websocket-protocol')) bad = 'Server sent a subprotocol';
    if (bad) {
      this.fail(new Error(bad));
      return false;
    }
    this.clearHandshakeTimer();
    this.readyState = WebSocketClient.OPEN;
    this.emit('open');
    return true;
  }

  /** Consumes one frame from buf; false when buf does not hold a whole frame yet. */
  private parseFrame(): boolean {
    const b = this.buf;
    if (b.length < 2) return false;
    const fin = (b[0]! & 0x80) !== 0;
    const opcode = b[0]! & 0x0f;
    if ((b[0]! & 0x70) !== 0) throw new ProtocolError('RSV bits set without an extension', 1002);
    if ((b[1]! & 0x80) !== 0) throw new ProtocolError('masked frame from the server', 1002);
    let len = b[1]! & 0x7f;
    let off = 2;
    if (len === 126) {
      if (b.length < 4) return false;
      len = b.readUInt16BE(2);
      off = 4;
    } else if (len === 127) {
      if (b.length < 10) return false;
      const hi = b.readUInt32BE(2);
      if (hi > 0x1fffff) throw new ProtocolError('frame length over 2^53', 1009);
      len = hi * 0x100000000 + b.readUInt32BE(6);
      off = 10;
    }
    const control = opcode >= 0x8;
    if (control) {
      if (!fin) throw new ProtocolError('fragmented control frame', 1002);
      if (len > 125) throw new ProtocolError('control frame over 125 bytes', 1002);
      if (opcode > OP_PONG) throw new ProtocolError(`unknown opcode ${opcode}`, 1002);
    } else if (opcode > OP_BINARY) {
      throw new ProtocolError(`unknown opcode ${opcode}`, 1002);
    } else if (len + (this.fragments?.bytes ?? 0) > this.maxPayload) {
      throw new ProtocolError('Max payload size exceeded', 1009);
    }
    if (b.length < off + len) return false;
    const payload = b.subarray(off, off + len);
    this.buf = b.subarray(off + len);
    if (control) this.onControl(opcode, payload);
    else this.onDataFrame(opcode, fin, payload);
    return true;
  }

  private onDataFrame(opcode: number, fin: boolean, payload: Buffer): void {
    if (opcode === OP_CONTINUATION) {
      if (!this.fragments) throw new ProtocolError('continuation frame without a message', 1002);
    } else if (this.fragments) {
      throw new ProtocolError('new message inside a fragmented one', 1002);
    } else {
      this.fragments = { opcode, parts: [], bytes: 0 };
    }
    const m = this.fragments;
    // Copy: buf's memory is reused by later chunks.
    m.parts.push(Buffer.from(payload));
    m.bytes += payload.length;
    if (!fin) return;
    this.fragments = null;
    const data = m.parts.length === 1 ? m.parts[0]! : Buffer.concat(m.parts, m.bytes);
    if (m.opcode === OP_TEXT && !isUtf8(data)) {
      throw new ProtocolError('invalid UTF-8 in a text message', 1007);
    }
    if (this.readyState === WebSocketClient.OPEN) this.emit('message', data, m.opcode === OP_BINARY);
  }

  private onControl(opcode: number, payload: Buffer): void {
    const data = Buffer.from(payload);
    if (opcode === OP_PING) {
      if (this.readyState === WebSocketClient.OPEN) this.writeFrame(OP_PONG, data);
      this.emit('ping', data);
    } else if (opcode === OP_PONG) {
      this.emit('pong', data);
    } else {
      this.onCloseFrame(data);
    }
  }

  private onCloseFrame(data: Buffer): void {
    if (this.closeFrameReceived) return;
    if (data.length === 1) throw new ProtocolError('close frame of 1 byte', 1002);
    if (data.length >= 2) {
      const code = data.readUInt16BE(0);
      if (!validCloseCode(code)) throw new ProtocolError(`invalid close code ${code}`, 1002);
      const reason = data.subarray(2);
      if (!isUtf8(reason)) throw new ProtocolError('invalid UTF-8 in the close reason', 1007);
      this.closeCode = code;
      this.closeReason = reason;
    } else {
      this.closeCode = 1005;
    }
    this.closeFrameReceived = true;
    if (this.closeFrameSent) {
      this.socket?.end();
      return;
    }
    // Echo the peer's close, then wait for it to close the TCP connection.
    this.readyState = WebSocketClient.CLOSING;
    if (this.closeCode === 1005) this.sendClose(undefined, '');
    else this.sendClose(this.closeCode, this.closeReason.toString());
    this.socket?.end();
    this.closeTimer = setTimeout(() => this.socket?.destroy(), CLOSE_TIMEOUT_MS);
  }

  private protocolError(e: ProtocolError): void {
    this.emit('error', e);
    if (this.readyState === WebSocketClient.OPEN) {
      this.readyState = WebSocketClient.CLOSING;
      this.sendClose(e.closeCode, '');
    }
    this.socket?.destroy();
  }

  /** A failure before or during the handshake: error, then close 1006. */
  private fail(e: Error): void {
    if (this.readyState === WebSocketClient.CLOSED || this.readyState === WebSocketClient.CLOSING) return;
    this.clearHandshakeTimer();
    this.readyState = WebSocketClient.CLOSING;
    this.pendingError = e;
    const s = this.socket;
    // The socket's close event ends it; without a socket (still resolving tls) it ends here.
    if (s && !s.destroyed) s.destroy();
    process.nextTick(() => {
      this.emitPendingError();
      if (!s || s.destroyed) this.emitClose();
    });
  }

  private emitPendingError(): void {
    const e = this.pendingError;
    this.pendingError = null;
    if (e) this.emit('error', e);
  }

  private onSocketClose(): void {
    this.clearHandshakeTimer();
    this.emitClose();
  }

  private clearHandshakeTimer(): void {
    if (this.handshakeTimer) clearTimeout(this.handshakeTimer);
    this.handshakeTimer = null;
  }

  private emitClose(): void {
    if (this.closeEmitted) return;
    this.closeEmitted = true;
    this.emitPendingError();
    if (this.closeTimer) clearTimeout(this.closeTimer);
    this.readyState = WebSocketClient.CLOSED;
    this.emit('close', this.closeFrameReceived ? this.closeCode : 1006, this.closeReason);
  }
}

/** Close codes a peer may send (RFC 6455 §7.4). */
function validCloseCode(code: number): boolean {
  return (
    (code >= 1000 && code <= 1014 && code !== 1004 && code !== 1005 && code !== 1006) ||
    (code >= 3000 && code <= 4999)
  );
}
