// svc's client for svcd's mgmt.sock: JSON-RPC 2.0 over a unix socket, one message per line,
// on json-rpc-2.0's client (the server side uses its server). One connection per client;
// calls may be concurrent (matched by id); notifications go to onNotification (streaming
// methods such as events.subscribe).
import { createConnection, type Socket } from 'node:net';
import { JSONRPCClient, JSONRPCErrorException, type JSONRPCResponse } from 'json-rpc-2.0';
import { SvcError } from '../protocol/errors.js';
import { errorFromRpc, type RpcErrorObject } from '../protocol/mgmt.js';

/** A line from svcd: a response to a call, or a notification (a method and no id). */
interface Incoming {
  id?: unknown;
  method?: unknown;
  params?: unknown;
}

export class MgmtClient {
  private readonly rpc: JSONRPCClient;
  private buffer = '';
  private closedError: SvcError | null = null;
  onNotification: (method: string, params: unknown) => void = () => {};

  private constructor(private readonly socket: Socket) {
    this.rpc = new JSONRPCClient((request: unknown) => {
      if (this.closedError) throw this.closedError;
      socket.write(`${JSON.stringify(request)}\n`);
    });
    socket.setEncoding('utf8');
    socket.on('data', (chunk: string) => this.onData(chunk));
    socket.on('close', () => {
      this.closedError = new SvcError('unavailable', 'svcd closed the mgmt.sock connection');
      this.rpc.rejectAllPendingRequests(this.closedError.message);
    });
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

  /** Calls `method`; an error answer becomes the SvcError svcd sent, a lost connection `unavailable`. */
  async call<T>(method: string, params?: unknown): Promise<T> {
    if (this.closedError) throw this.closedError;
    try {
      return (await this.rpc.request(method, params)) as T;
    } catch (e) {
      if (this.closedError) throw this.closedError;
      if (e instanceof JSONRPCErrorException)
        throw errorFromRpc({ code: e.code, message: e.message, data: e.data as RpcErrorObject['data'] });
      throw e;
    }
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
      if (line.trim()) this.onLine(line);
    }
  }

  private onLine(line: string): void {
    let msg: Incoming;
    try {
      msg = JSON.parse(line) as Incoming;
    } catch {
      return;
    }
    if (typeof msg !== 'object' || msg === null) return;
    if (typeof msg.method === 'string' && (msg.id === undefined || msg.id === null)) {
      this.onNotification(msg.method, msg.params);
      return;
    }
    this.rpc.receive(msg as JSONRPCResponse);
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
