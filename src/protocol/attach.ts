// PTY attach wire contract (docs/attach.md), the same on svcd.sock, on the tower's
// /api/attach-ws and on the node's dial-back /nodes/attach/{stream_id}: a WebSocket whose
// binary frames are terminal bytes and whose text frames are JSON control messages.
import { compileCheck } from './check.js';
import { ERROR_CODES, type ErrorCode } from './errors.js';
import { type Static, Type } from './type.js';

/** svcd.sock path (WebSocket over the unix socket): /attach?agent=…&cols=…&rows=…&read_only=1 */
export const LOCAL_ATTACH_PATH = '/attach';
/** The tower's viewer endpoint. */
export const ATTACH_WS_PATH = '/api/attach-ws';
/** POST: a single-use ticket for browsers. */
export const ATTACH_TICKETS_PATH = '/api/attach-tickets';
/** The node dials back here (node JWT) after an attach.open. */
export const NODE_ATTACH_PREFIX = '/nodes/attach/';

export const TICKET_TTL_MS = 60_000;
/** attach.open older than this (by its ts) is refused by the node. */
export const ATTACH_OPEN_MAX_AGE_MS = 60_000;
/** How long the tower waits for the node to dial back. */
export const DIAL_BACK_TIMEOUT_MS = 10_000;

/**
 * Flow control, per hop: a sender stops reading its source while more than HIGH bytes it sent
 * are unacknowledged by the socket, and starts again below LOW. A viewer more than LAG_CAP
 * behind while others keep up is skipped and later re-synced from the screen state.
 */
export const FLOW_HIGH_BYTES = 1024 * 1024;
export const FLOW_LOW_BYTES = 256 * 1024;
export const FLOW_LAG_CAP_BYTES = 4 * 1024 * 1024;

/**
 * The tower accepts WebSocket frames up to TOWER_MAX_FRAME_BYTES (on every WebSocket route: a
 * bigger frame closes the socket with 1009). Senders of terminal bytes (the node, `svc attach`)
 * split what they send into binary frames of at most ATTACH_FRAME_BYTES; terminal bytes are a
 * stream, so a split (even inside a UTF-8 sequence or an escape) changes nothing for the reader.
 */
export const TOWER_MAX_FRAME_BYTES = 64 * 1024;
export const ATTACH_FRAME_BYTES = 32 * 1024;

/** Splits terminal bytes into frames of at most `max` bytes (views, no copy). */
export function splitFrames(data: Buffer, max = ATTACH_FRAME_BYTES): Buffer[] {
  if (data.length <= max) return [data];
  const out: Buffer[] = [];
  for (let i = 0; i < data.length; i += max) out.push(data.subarray(i, i + max));
  return out;
}

/** Terminal size limits (larger values are clamped). */
export const MAX_COLS = 1000;
export const MAX_ROWS = 500;

/** viewer → node */
export interface ResizeFrame {
  type: 'resize';
  cols: number;
  rows: number;
}
/** node → viewer: the agent exited (the socket closes next). */
export interface ExitFrame {
  type: 'exit';
  code: number | null;
  signal?: string | null;
}
/** node or tower → viewer: the session cannot open or had to end (the socket closes next). */
export interface ErrorFrame {
  type: 'error';
  code: ErrorCode;
  message: string;
}
export type ControlFrame = ResizeFrame | ExitFrame | ErrorFrame;

/** Every text frame, both ways: a JSON object with a string `type`. */
const FrameEnvelope = Type.Object({ type: Type.String({ minLength: 1, maxLength: 100 }) });
/** viewer → node. Sizes are numbers, clamped by the receiver to what a terminal can be. */
export const ResizeFrameSchema = Type.Object({
  type: Type.Literal('resize'),
  cols: Type.Number(),
  rows: Type.Number(),
});
/** node → viewer. */
export const ExitFrameSchema = Type.Object({
  type: Type.Literal('exit'),
  code: Type.Union([Type.Integer(), Type.Null()]),
  signal: Type.Optional(Type.Union([Type.String({ maxLength: 100 }), Type.Null()])),
});
export const ErrorFrameSchema = Type.Object({
  type: Type.Literal('error'),
  code: Type.String({ minLength: 1, maxLength: 100 }),
  message: Type.String({ maxLength: 4096 }),
});

/** Longest text (control) frame either side accepts. */
export const MAX_CONTROL_FRAME_CHARS = 8192;

/**
 * How a receiver judged one text frame: a message it knows (valid), a type it does not know
 * (skipped: a newer peer may send more), or invalid input, which closes that stream with
 * 1008 (decode before touching).
 */
export type FrameDecoded<T> = { ok: true; frame: T } | { ok: 'skip' } | { ok: false; why: string };

const checkEnvelope = compileCheck(FrameEnvelope);
const checkResize = compileCheck(ResizeFrameSchema);
const checkExit = compileCheck(ExitFrameSchema);
const checkError = compileCheck(ErrorFrameSchema);

function decodeFrame<T>(
  text: string,
  known: Record<string, (v: unknown) => { path: string; message: string } | null>,
): FrameDecoded<T> {
  if (text.length > MAX_CONTROL_FRAME_CHARS)
    return { ok: false, why: `control frames are at most ${MAX_CONTROL_FRAME_CHARS} characters` };
  let v: unknown;
  try {
    v = JSON.parse(text);
  } catch {
    return { ok: false, why: 'text frames are JSON control messages' };
  }
  const env = checkEnvelope(v);
  if (env) return { ok: false, why: `not a control frame: ${env.path || 'frame'} ${env.message}` };
  const type = (v as { type: string }).type;
  const check = known[type];
  if (!check) return { ok: 'skip' };
  const bad = check(v);
  if (bad) return { ok: false, why: `invalid ${type} frame: ${bad.path || 'frame'} ${bad.message}` };
  return { ok: true, frame: v as T };
}

/** Decodes a text frame from a viewer (a resize, sizes clamped). */
export function decodeViewerFrame(text: string): FrameDecoded<ResizeFrame> {
  const d = decodeFrame<ResizeFrame>(text, { resize: checkResize });
  if (d.ok !== true) return d;
  const cols = clampSize(d.frame.cols, 2, MAX_COLS);
  const rows = clampSize(d.frame.rows, 1, MAX_ROWS);
  if (cols === null || rows === null)
    return { ok: false, why: 'invalid resize frame: sizes must be numbers' };
  return { ok: true, frame: { type: 'resize', cols, rows } };
}

/** Decodes a text frame from the node or the tower (an exit or an error). */
export function decodeServerFrame(text: string): FrameDecoded<ExitFrame | ErrorFrame> {
  return decodeFrame<ExitFrame | ErrorFrame>(text, { exit: checkExit, error: checkError });
}

/** A viewer frame as a resize, or null for anything else (valid or not). */
export function parseViewerFrame(text: string): ResizeFrame | null {
  const d = decodeViewerFrame(text);
  return d.ok === true ? d.frame : null;
}

/** Parses a text frame from the node or tower (for clients); null when not a control frame. */
export function parseServerFrame(text: string): ExitFrame | ErrorFrame | null {
  const d = decodeServerFrame(text);
  if (d.ok !== true) return null;
  const f = d.frame;
  return f.type === 'exit' ? { type: 'exit', code: f.code, signal: f.signal ?? null } : f;
}

/** WebSocket close code sent with an error frame: 4000 + the HTTP status of the error code. */
export function closeCodeOf(code: ErrorCode): number {
  return 4000 + ERROR_CODES[code].status;
}

export function clampSize(n: unknown, min: number, max: number): number | null {
  if (typeof n !== 'number' || !Number.isFinite(n)) return null;
  return Math.min(max, Math.max(min, Math.floor(n)));
}

/** Query of an attach request (svcd.sock and /api/attach-ws share agent/cols/rows/read_only). */
export function parseSizeQuery(q: URLSearchParams): { cols: number; rows: number; readOnly: boolean } {
  return {
    cols: clampSize(Number(q.get('cols') ?? '80'), 2, MAX_COLS) ?? 80,
    rows: clampSize(Number(q.get('rows') ?? '24'), 1, MAX_ROWS) ?? 24,
    readOnly: ['1', 'true'].includes(q.get('read_only') ?? ''),
  };
}

/** POST /api/attach-tickets body. */
export const AttachTicketRequest = Type.Object(
  {
    node: Type.String({ minLength: 1, maxLength: 200 }),
    agent: Type.String({ minLength: 1, maxLength: 200 }),
    read_only: Type.Optional(Type.Boolean()),
  },
  { additionalProperties: false },
);
export type AttachTicketRequest = Static<typeof AttachTicketRequest>;

export const AttachTicket = Type.Object({
  ticket: Type.String(),
  node: Type.String(),
  agent: Type.String(),
  read_only: Type.Boolean(),
  expires_at: Type.String(),
});
export type AttachTicket = Static<typeof AttachTicket>;

/** One viewer in attach.list. */
export interface AttachViewerInfo {
  id: string;
  via: 'local' | 'tower';
  who: string;
  read_only: boolean;
  since: string;
}

/** attach.list result: attachable agents of this node and who is attached. */
export interface AttachListResult {
  items: { agent_id: string; cols: number; rows: number; viewers: AttachViewerInfo[] }[];
}
