// svc's client for svcd's mgmt.sock: JSON-RPC 2.0 over a unix socket, one message per line.
// One connection per client; calls may be concurrent (matched by id); notifications go to
// onNotification (streaming methods such as events.subscribe).
import { createConnection, type Socket } from 'node:net';
import { SvcError } from '../protocol/errors.js';
import { errorFromRpc, type RpcErrorObject } from '../protocol/mgmt.js';

interface Pending {
  resolve(v: unknown): void;
  reject(e: unknown): void;
}

export class MgmtClient {
  private nextId = 1;
  private pending = new Map<number, Pending>();
  private buffer = '';
  private closedError: SvcError | null = null;
  onNotification: (method: string, params: unknown) => void = () => {};

  private constructor(private readonly socket: Socket) {
    socket.setEncoding('utf8');
    socket.on('data', (chunk: string) => this.onData(chunk));
    socket.on('close', () =>
      this.failAll(new SvcError('unavailable', 'svcd closed the mgmt.sock connection')),
    );
    socket.on('error', () => {});
  }

  /** Connects; a missing or dead socket is `unavailable` with a hint to start the daemon. */
  static connect(path: string): Promise<MgmtClient> {
    return new Promise((resolve, reject) => {
      const socket = createConnection(path);
      socket.once('connect', () => resolve(new MgmtClient(socket)));
      socket.once('error', (e: NodeJS.ErrnoException) => {
        reject(
          new SvcError(
            'unavailable',
            `svcd is not running (cannot connect to ${path}: ${e.code ?? e.message}); start it with "svc daemon up"`,
          ),
        );
      });
    });
  }

  call<T>(method: string, params?: unknown): Promise<T> {
    if (this.closedError) return Promise.reject(this.closedError);
    const id = this.nextId++;
    const msg = { jsonrpc: '2.0', id, method, ...(params !== undefined ? { params } : {}) };
    return new Promise<T>((resolve, reject) => {
      this.pending.set(id, { resolve: resolve as (v: unknown) => void, reject });
      this.socket.write(`${JSON.stringify(msg)}\n`);
    });
  }

  close(): void {
    this.socket.end();
    this.socket.destroy();
  }

  private onData(chunk: string): void {
    this.buffer += chunk;
    for (let nl = this.buffer.indexOf('\n'); nl >= 0; nl = this.buffer.indexOf('\n')) {
      const line = this.buffer.slice(0, nl);
      this.buffer = this.buffer.slice(nl + 1);
      if (line.trim()) this.onMessage(line);
    }
  }

  private onMessage(line: string): void {
    let msg: {
      id?: number | null;
      result?: unknown;
      error?: RpcErrorObject;
      method?: string;
      params?: unknown;
    };
    try {
      msg = JSON.parse(line) as typeof msg;
    } catch {
      return;
    }
    if (msg.method && (msg.id === undefined || msg.id === null)) {
      this.onNotification(msg.method, msg.params);
      return;
    }
    if (typeof msg.id !== 'number') return;
    const p = this.pending.get(msg.id);
    if (!p) return;
    this.pending.delete(msg.id);
    if (msg.error) p.reject(errorFromRpc(msg.error));
    else p.resolve(msg.result);
  }

  private failAll(e: SvcError): void {
    this.closedError = e;
    for (const p of this.pending.values()) p.reject(e);
    this.pending.clear();
  }
}

/** Connects, makes one call, closes. */
export async function mgmtCall<T>(path: string, method: string, params?: unknown): Promise<T> {
  const c = await MgmtClient.connect(path);
  try {
    return await c.call<T>(method, params);
  } finally {
    c.close();
  }
}
