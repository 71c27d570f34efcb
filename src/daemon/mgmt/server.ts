// mgmt.sock: JSON-RPC 2.0, newline-delimited, many concurrent clients. A line that is not a
// JSON-RPC request (not JSON: -32700; not a request: -32600; longer than the limit: -32700,
// never buffered) is answered, logged, and ends that connection; other clients go on.
// Components register methods; params are validated against each method's schema before its
// handler runs (-32602, the connection stays).

import { createRequire } from 'node:module';
import type { Socket } from 'node:net';
import type { TSchema } from '@sinclair/typebox';
import type AjvModule from 'ajv';
import type { ErrorObject } from 'ajv';
import { type JSONRPCRequest, JSONRPCServer } from 'json-rpc-2.0';
import type { Logger } from '../../lib/log.js';
import { compileCheck } from '../../protocol/check.js';
import { Empty } from '../../protocol/common.js';
import { isSvcError, SvcError } from '../../protocol/errors.js';
import { collapseConstUnions } from '../../protocol/field-errors.js';
import {
  errorFromRpc,
  JSONRPC_INTERNAL_ERROR,
  JSONRPC_INVALID_REQUEST,
  JSONRPC_PARSE_ERROR,
  JsonRpcBatch,
  JsonRpcRequest,
  MGMT_MAX_IN_FLIGHT,
  MGMT_MAX_LINE_BYTES,
  MGMT_MAX_UNREAD_BYTES,
  type RpcErrorObject,
  rpcErrorOf,
} from '../../protocol/mgmt.js';
import type { CallContext, MethodHandler, MethodRegistry } from '../context.js';
import { listenUnix, type UnixListener } from '../sockets.js';

type Ajv = AjvModule.default;
/** The first error of a params check, or null when the params are valid. */
type Check = (params: unknown) => Pick<ErrorObject, 'keyword' | 'instancePath' | 'params' | 'message'> | null;

/**
 * Ajv, loaded and compiling a method's schema at that method's first call, not at start: an idle
 * daemon is called a few methods only, and Ajv with every compiled validator was ≈1 MiB of its
 * heap (docs/perf-notes.md, daemon). Ajv is CommonJS, so a synchronous require does it.
 */
let ajv: Ajv | null = null;
function compile(schema: TSchema): Check {
  if (!ajv) {
    let mod: typeof AjvModule;
    try {
      mod = createRequire(import.meta.url)('ajv') as typeof AjvModule;
    } catch (e) {
      throw new SvcError('internal', `cannot load the params validator (ajv): ${(e as Error).message}`);
    }
    const Ctor = mod.default ?? mod;
    ajv = new Ctor({ useDefaults: true, removeAdditional: false, strict: false, allErrors: false });
  }
  const validate = ajv.compile(schema);
  return (p) =>
    validate(p)
      ? null
      : (collapseConstUnions(validate.errors ?? [])[0] ?? { keyword: '', instancePath: '', params: {} });
}

/** `Empty` (no params), the schema of most methods, checked as Ajv would without Ajv. */
const checkEmpty: Check = (p) => {
  if (typeof p !== 'object' || p === null || Array.isArray(p))
    return { keyword: 'type', instancePath: '', params: { type: 'object' }, message: 'must be object' };
  for (const key in p)
    return {
      keyword: 'additionalProperties',
      instancePath: '',
      params: { additionalProperty: key },
      message: 'must NOT have additional properties',
    };
  return null;
};

/** The envelope checks, without Ajv (protocol/check.ts): every line passes them first. */
const checkRequest = compileCheck(JsonRpcRequest);
const checkBatch = compileCheck(JsonRpcBatch);

/** What one line comes to: the reply to write (or none), and whether to close after it. */
interface LineOutcome {
  reply: unknown;
  close: boolean;
}

export class MgmtServer implements MethodRegistry {
  private readonly rpc = new JSONRPCServer<CallContext>({ errorListener: () => {} });
  private listener: UnixListener | null = null;
  private readonly connections = new Set<{ socket: Socket; queue: string[] }>();
  private peakUnread = 0;

  constructor(private readonly log: Logger) {
    this.rpc.mapErrorToJSONRPCErrorResponse = (id, error: unknown) => {
      if (isSvcError(error)) return { jsonrpc: '2.0', id, error: rpcErrorOf(error) };
      this.log.error({ err: error }, 'mgmt method failed');
      return { jsonrpc: '2.0', id, error: { code: JSONRPC_INTERNAL_ERROR, message: 'internal error' } };
    };
  }

  register(name: string, handler: MethodHandler, schema?: TSchema): void {
    if (this.rpc.hasMethod(name)) throw new Error(`mgmt method ${name} registered twice`);
    let check: Check | null = schema === Empty ? checkEmpty : null;
    this.rpc.addMethod(name, async (params: unknown, call: CallContext) => {
      const p = params ?? {};
      if (schema && !check) check = compile(schema);
      const e = check?.(p);
      if (e) {
        const field = `params${e.instancePath}`;
        const message =
          e.keyword === 'additionalProperties'
            ? `unknown field ${String(e.params.additionalProperty)}`
            : (e.message ?? 'invalid');
        throw new SvcError('validation_failed', `${field}: ${message}`, { errors: [{ field, message }] });
      }
      return (await handler(p, call)) ?? null;
    });
  }

  /**
   * Runs a registered method in-process, exactly as a mgmt.sock client would (same params
   * validation and errors), for requests that reach svcd another way (the tower's
   * node.request). Throws the method's SvcError.
   */
  async invoke(name: string, params: unknown, signal: AbortSignal): Promise<unknown> {
    const call: CallContext = { id: null, signal, notify: () => {}, unread: () => 0, streaming: () => {} };
    const res = await this.rpc.receive({ jsonrpc: '2.0', id: 1, method: name, params: params ?? {} }, call);
    if (!res) throw new SvcError('internal', `mgmt method ${name} gave no answer`);
    if (res.error) throw errorFromRpc(res.error as RpcErrorObject);
    return res.result ?? null;
  }

  /**
   * Replies written but not yet read by clients, request lines read but waiting to run, and the
   * most ever left unread on one connection (the bound mgmt.sock keeps: see serve()).
   */
  backlog(): { unread: number; queued: number; peakUnread: number } {
    let unread = 0;
    let queued = 0;
    for (const c of this.connections) {
      unread += c.socket.writableLength;
      queued += c.queue.length;
    }
    return { unread, queued, peakUnread: this.peakUnread };
  }

  async listen(path: string): Promise<void> {
    this.listener = await listenUnix(path, (socket) => this.serve(socket));
  }

  async close(): Promise<void> {
    await this.listener?.close();
  }

  private serve(socket: Socket): void {
    const abort = new AbortController();
    const connection: Omit<CallContext, 'id' | 'streaming'> = {
      signal: abort.signal,
      notify: (method, params) => {
        if (!socket.destroyed) socket.write(`${JSON.stringify({ jsonrpc: '2.0', method, params })}\n`);
      },
      unread: () => socket.writableLength,
    };
    let buffer = '';
    let closing = false;
    const send = (msg: unknown) => {
      if (!socket.destroyed && !socket.writableEnded) socket.write(`${JSON.stringify(msg)}\n`);
    };
    // Invalid input: the protocol's error, a log line, and this connection ends (the others
    // and the daemon go on). Nothing more is read from it.
    const refuse = (msg: unknown, why: string) => {
      if (closing) return;
      closing = true;
      queue.length = 0;
      this.log.warn({ why }, 'mgmt.sock connection closed: invalid request');
      send(msg);
      socket.end();
      socket.resume();
    };
    // Backpressure: a client that sends requests and never reads the replies must not grow
    // the daemon's memory. Lines wait in `queue` and run while fewer than MGMT_MAX_IN_FLIGHT
    // are running and less than MGMT_MAX_UNREAD_BYTES of replies sit unread; otherwise the
    // socket stops being read (the kernel's buffer, then the client's writes, hold the rest)
    // until replies drain. A stream (events.subscribe) releases its slot once it is open.
    const queue: string[] = [];
    let inFlight = 0;
    const pump = () => {
      if (socket.writableLength > this.peakUnread) this.peakUnread = socket.writableLength;
      while (
        queue.length > 0 &&
        inFlight < MGMT_MAX_IN_FLIGHT &&
        socket.writableLength < MGMT_MAX_UNREAD_BYTES
      ) {
        run(queue.shift() as string);
      }
      if (socket.destroyed) return;
      const hold = queue.length > 0 || socket.writableLength >= MGMT_MAX_UNREAD_BYTES;
      if (hold) socket.pause();
      else if (socket.isPaused()) socket.resume();
    };
    const run = (line: string) => {
      inFlight++;
      let released = false;
      const release = () => {
        if (released) return;
        released = true;
        inFlight--;
        queueMicrotask(pump);
      };
      void this.handleLine(line, { ...connection, streaming: release }).then((res) => {
        if (res.close) refuse(res.reply, 'not a JSON-RPC 2.0 request');
        else if (res.reply !== null) send(res.reply);
        release();
      });
    };
    socket.setEncoding('utf8');
    socket.on('data', (chunk: string) => {
      if (closing) return;
      let rest = chunk;
      for (;;) {
        const nl = rest.indexOf('\n');
        if (nl < 0) {
          buffer += rest;
          if (Buffer.byteLength(buffer) > MGMT_MAX_LINE_BYTES) {
            buffer = '';
            refuse(lineTooLong(), 'request line too long');
            return;
          }
          break;
        }
        const line = buffer + rest.slice(0, nl);
        rest = rest.slice(nl + 1);
        buffer = '';
        if (Buffer.byteLength(line) > MGMT_MAX_LINE_BYTES) {
          refuse(lineTooLong(), 'request line too long');
          return;
        }
        if (line.trim() === '') continue;
        queue.push(line);
      }
      pump();
    });
    const entry = { socket, queue };
    this.connections.add(entry);
    socket.on('drain', pump);
    socket.on('close', () => {
      this.connections.delete(entry);
      abort.abort();
    });
    socket.on('error', () => abort.abort());
  }

  private async handleLine(line: string, connection: Omit<CallContext, 'id'>): Promise<LineOutcome> {
    let request: unknown;
    try {
      request = JSON.parse(line);
    } catch {
      return {
        reply: { jsonrpc: '2.0', id: null, error: { code: JSONRPC_PARSE_ERROR, message: 'Parse error' } },
        close: true,
      };
    }
    // Decode before touching: nothing of the line is read until it is a request (or a batch).
    const bad = Array.isArray(request) ? checkBatch(request) : checkRequest(request);
    if (bad !== null) {
      const message = `Invalid Request: ${bad.path ? `${bad.path} ` : ''}${bad.message}`;
      return {
        reply: { jsonrpc: '2.0', id: null, error: { code: JSONRPC_INVALID_REQUEST, message } },
        close: true,
      };
    }
    // Each request gets its id in its context: a streaming method names its stream by it.
    const id = Array.isArray(request) ? null : (request as JsonRpcRequest).id;
    const call: CallContext = { ...connection, id: id ?? null };
    try {
      return { reply: await this.rpc.receive(request as JSONRPCRequest, call), close: false };
    } catch (e) {
      this.log.warn({ err: e }, 'mgmt request failed');
      return {
        reply: {
          jsonrpc: '2.0',
          id: null,
          error: { code: JSONRPC_INTERNAL_ERROR, message: 'internal error' },
        },
        close: false,
      };
    }
  }
}

function lineTooLong() {
  return {
    jsonrpc: '2.0',
    id: null,
    error: { code: JSONRPC_PARSE_ERROR, message: `request line longer than ${MGMT_MAX_LINE_BYTES} bytes` },
  };
}
