// mgmt.sock wire format (docs/architecture.md, mgmt.sock): JSON-RPC 2.0, one message per line
// (newline-delimited).
// Protocol errors use the standard codes; application errors carry the HTTP-like status of
// their SvcError code as the numeric code and the stable string code in `data.code`.
import { ERROR_CODES, type ErrorCode, isErrorCode, SvcError } from './errors.js';
import { type Static, Type } from './type.js';

export const JSONRPC_PARSE_ERROR = -32700;
export const JSONRPC_INVALID_REQUEST = -32600;
export const JSONRPC_METHOD_NOT_FOUND = -32601;
export const JSONRPC_INVALID_PARAMS = -32602;
export const JSONRPC_INTERNAL_ERROR = -32603;

/** Longest request line mgmt.sock accepts; longer lines get an error and are discarded. */
export const MGMT_MAX_LINE_BYTES = 1024 * 1024;
/**
 * Replies a client may leave unread before mgmt.sock stops reading its requests (notifications
 * of an events.subscribe stream have their own limit and end the stream instead).
 */
export const MGMT_MAX_UNREAD_BYTES = 1024 * 1024;
/** Requests of one connection running at once; more wait, unread, until one answers. */
export const MGMT_MAX_IN_FLIGHT = 64;

/**
 * One request (or notification, without id) as mgmt.sock accepts it. A line that is not JSON
 * is answered -32700, one that is not such a request (or a batch of 1 to MGMT_MAX_BATCH of
 * them) -32600; either way the connection is then closed. Params are checked per method
 * afterwards (-32602, the connection stays).
 */
export const JsonRpcRequest = Type.Object(
  {
    jsonrpc: Type.Literal('2.0'),
    method: Type.String({ minLength: 1, maxLength: 200 }),
    id: Type.Optional(Type.Union([Type.String({ maxLength: 200 }), Type.Number(), Type.Null()])),
    params: Type.Optional(Type.Union([Type.Object({}), Type.Array(Type.Unknown())])),
  },
  { additionalProperties: false },
);
export type JsonRpcRequest = Static<typeof JsonRpcRequest>;
export const MGMT_MAX_BATCH = 100;
export const JsonRpcBatch = Type.Array(JsonRpcRequest, { minItems: 1, maxItems: MGMT_MAX_BATCH });

export interface RpcErrorObject {
  code: number;
  message: string;
  data?: { code: ErrorCode; errors?: { field: string; message: string }[] };
}

export function rpcErrorOf(e: SvcError): RpcErrorObject {
  const code = e.code === 'validation_failed' || e.code === 'bad_request' ? JSONRPC_INVALID_PARAMS : e.status;
  return { code, message: e.message, data: { code: e.code, ...(e.errors ? { errors: e.errors } : {}) } };
}

export function errorFromRpc(err: RpcErrorObject): SvcError {
  const code = err.data?.code;
  if (isErrorCode(code))
    return new SvcError(code, err.message, err.data?.errors ? { errors: err.data.errors } : {});
  if (err.code === JSONRPC_METHOD_NOT_FOUND) return new SvcError('not_found', err.message);
  if (err.code === JSONRPC_INVALID_PARAMS) return new SvcError('validation_failed', err.message);
  return new SvcError('internal', err.message);
}

export { ERROR_CODES };
