// What a mgmt.sock method is: a name (noun.verb), a params schema and a handler that gets the
// call's context. Each component's methods.ts builds a table of them; daemon.ts registers
// every table on the server (server.ts), so no component registers itself.
import type { TSchema } from '@sinclair/typebox';

export interface CallContext {
  /** The JSON-RPC id of this request; null for a notification, a batch or an in-process call. */
  id: string | number | null;
  /** Aborted when the client disconnects. */
  signal: AbortSignal;
  /** Sends a JSON-RPC notification to this client (for streaming methods). */
  notify(method: string, params: unknown): void;
  /** Bytes sent to this client that it has not read yet: a streaming method's backlog. */
  unread(): number;
  /**
   * A streaming method calls this once its stream is open: the request then stops counting
   * against the connection's limit of requests running at once (it may stay open for hours).
   */
  streaming(): void;
}

export type MethodHandler = (params: unknown, call: CallContext) => Promise<unknown>;

/** mgmt.sock's method table; names are noun.verb (docs/architecture.md, mgmt.sock). */
export interface MethodRegistry {
  /** params are validated against `schema` (if given) before the handler runs. */
  register(name: string, handler: MethodHandler, schema?: TSchema): void;
}

/** One method of a component's table. */
export interface MgmtMethod {
  name: string;
  handler: MethodHandler;
  /** params are validated against it before the handler runs. */
  schema?: TSchema;
}

/** A table entry; `schema` validates params before `handler` runs. */
export function method(name: string, handler: MethodHandler, schema?: TSchema): MgmtMethod {
  return schema ? { name, handler, schema } : { name, handler };
}

export function registerMethods(registry: MethodRegistry, methods: readonly MgmtMethod[]): void {
  for (const m of methods) registry.register(m.name, m.handler, m.schema);
}
