// The node control channel (docs/architecture.md): one WebSocket that svcd opens to the tower at
// GET /nodes/connect with "Authorization: Bearer <node JWT>". Text frames, one JSON message
// each. Liveness: both sides send WebSocket ping frames every HEARTBEAT_MS and close a
// channel that has been silent for DEAD_AFTER_MS.
import { type Static, type TSchema, Type } from './type.js';

export const CONTROL_PATH = '/nodes/connect';
export const HEARTBEAT_MS = 10_000;
export const DEAD_AFTER_MS = 30_000;

/** node → tower, first message after connecting; re-sent on every reconnect. */
const AgentPresence = Type.Union(
  ['online', 'busy', 'idle', 'offline', 'errored'].map((s) => Type.Literal(s)),
);

export const Hello = Type.Object({
  type: Type.Literal('hello'),
  version: Type.String({ maxLength: 200 }),
  /** Fresh random secret per svcd start; the tower signs attach.open with it (HMAC-SHA256). */
  attach_secret: Type.String({ minLength: 32, maxLength: 1024 }),
  /** Agents of this node that are running now, for presence. */
  agents: Type.Optional(
    Type.Array(Type.Object({ agent_id: Type.String({ maxLength: 200 }), status: AgentPresence }), {
      maxItems: 10_000,
    }),
  ),
});
export type Hello = Static<typeof Hello>;

/** tower → node, answer to hello. */
export const Welcome = Type.Object({
  type: Type.Literal('welcome'),
  node_id: Type.String({ minLength: 1, maxLength: 200 }),
  heartbeat_ms: Type.Integer({ minimum: 1 }),
});
export type Welcome = Static<typeof Welcome>;

/** tower → node: a task one of this node's agents could claim became claimable. */
export const TaskReady = Type.Object({
  type: Type.Literal('task_ready'),
  task_id: Type.String({ minLength: 1, maxLength: 200 }),
  mission_id: Type.String({ maxLength: 200 }),
  domain_id: Type.String({ maxLength: 200 }),
});
export type TaskReady = Static<typeof TaskReady>;

/** tower → node: a task running here was cancelled; stop its subagent. */
export const TaskCancelled = Type.Object({
  type: Type.Literal('task_cancelled'),
  task_id: Type.String({ minLength: 1, maxLength: 200 }),
});
export type TaskCancelled = Static<typeof TaskCancelled>;

/**
 * tower → node: an approval a task's subagent on this node waits for was decided (on any
 * replica). Best effort: the node also polls GET /approvals/{id} and asks again on reconnect.
 */
export const ApprovalDecided = Type.Object({
  type: Type.Literal('approval_decided'),
  approval_id: Type.String({ minLength: 1, maxLength: 200 }),
  status: Type.Union([Type.Literal('approved'), Type.Literal('rejected')]),
  reason: Type.Union([Type.String({ maxLength: 2000 }), Type.Null()]),
});
export type ApprovalDecided = Static<typeof ApprovalDecided>;

/**
 * tower → node: open an attach stream. `sig` = HMAC-SHA256(attach_secret, attachSigningString(msg))
 * in hex; the node dials back GET /nodes/attach/{stream_id} with its JWT.
 */
export const AttachOpen = Type.Object({
  type: Type.Literal('attach.open'),
  stream_id: Type.String({ pattern: '^[A-Za-z0-9_-]{8,100}$' }),
  agent_id: Type.String({ minLength: 1, maxLength: 200 }),
  cols: Type.Integer({ minimum: 1, maximum: 100_000 }),
  rows: Type.Integer({ minimum: 1, maximum: 100_000 }),
  read_only: Type.Boolean(),
  /** ms since epoch when the tower signed it; nodes refuse stale requests. */
  ts: Type.Number(),
  sig: Type.String({ maxLength: 200 }),
  /** Who asked (the tower's principal), for the node's attach events; not signed. */
  who: Type.Optional(Type.String({ maxLength: 1000 })),
});
export type AttachOpen = Static<typeof AttachOpen>;

export function attachSigningString(m: Omit<AttachOpen, 'sig' | 'type' | 'who'>): string {
  return ['attach.open', m.stream_id, m.agent_id, m.cols, m.rows, m.read_only ? 1 : 0, m.ts].join('\n');
}

/** node → tower: presence of one agent changed. */
export const AgentStatusMsg = Type.Object({
  type: Type.Literal('agent_status'),
  agent_id: Type.String({ maxLength: 200 }),
  status: AgentPresence,
});
export type AgentStatusMsg = Static<typeof AgentStatusMsg>;

/**
 * tower → node: a request on behalf of an operator (the console's node actions). The node
 * answers with one node.response carrying the same request_id. Only these methods exist; a
 * node runs each as the mgmt.sock method of the same name (node.status = agent.list + cron.list).
 */
export const NODE_REQUEST_METHODS = ['node.status', 'agent.restart', 'agent.pause', 'agent.resume'] as const;
export type NodeRequestMethod = (typeof NODE_REQUEST_METHODS)[number];
/** How long the tower waits for node.response before answering 504-like `unavailable`. */
export const NODE_REQUEST_TIMEOUT_MS = 10_000;

export const NodeRequest = Type.Object({
  type: Type.Literal('node.request'),
  request_id: Type.String({ minLength: 1, maxLength: 100 }),
  method: Type.Union(NODE_REQUEST_METHODS.map((m) => Type.Literal(m))),
  params: Type.Record(Type.String(), Type.Unknown()),
});
export interface NodeRequest {
  type: 'node.request';
  request_id: string;
  method: NodeRequestMethod;
  params: Record<string, unknown>;
}

/** node → tower: the answer to one node.request; exactly one of result and error. */
export const NodeResponse = Type.Object({
  type: Type.Literal('node.response'),
  request_id: Type.String({ minLength: 1, maxLength: 100 }),
  result: Type.Optional(Type.Unknown()),
  error: Type.Optional(Type.Object({ code: Type.String(), message: Type.String() })),
});
export type NodeResponse = Static<typeof NodeResponse>;

export type TowerToNode = Welcome | TaskReady | TaskCancelled | ApprovalDecided | AttachOpen | NodeRequest;
export type NodeToTower = Hello | AgentStatusMsg | NodeResponse;

/**
 * Every message on the channel, both ways: a JSON object with a string `type`. A message of a
 * type the receiver knows must match that type's schema, or the receiver closes the channel
 * with 1008; a type it does not know is skipped (a newer peer may send more).
 */
export const ControlEnvelope = Type.Object({ type: Type.String({ minLength: 1, maxLength: 100 }) });

/** The schema of each message type, by direction. */
export const TOWER_TO_NODE = {
  welcome: Welcome,
  task_ready: TaskReady,
  task_cancelled: TaskCancelled,
  approval_decided: ApprovalDecided,
  'attach.open': AttachOpen,
  'node.request': NodeRequest,
} as const;
export const NODE_TO_TOWER = {
  hello: Hello,
  agent_status: AgentStatusMsg,
  'node.response': NodeResponse,
} as const;

/** The close code for a message that does not decode (RFC 6455 policy violation). */
export const CLOSE_POLICY = 1008;

/** How decodeControl judged one text frame. */
export type Decoded<T> = { ok: true; msg: T } | { ok: 'skip'; type: string } | { ok: false; why: string };

/**
 * Decodes one text frame of the control channel against the receiver's schemas (`check`
 * compiles a schema: Ajv on the tower, protocol/check.ts in svcd). Nothing of the message is
 * read before it validates.
 */
export function controlDecoder<T>(
  schemas: Record<string, TSchema>,
  compile: (s: TSchema) => (v: unknown) => string | null,
): (text: string) => Decoded<T> {
  const envelope = compile(ControlEnvelope);
  const byType = new Map(Object.entries(schemas).map(([t, s]) => [t, compile(s)]));
  return (text) => {
    let value: unknown;
    try {
      value = JSON.parse(text);
    } catch {
      return { ok: false, why: 'messages are JSON text' };
    }
    const bad = envelope(value);
    if (bad !== null) return { ok: false, why: `not a control message: ${bad}` };
    const type = (value as { type: string }).type;
    const check = byType.get(type);
    if (!check) return { ok: 'skip', type };
    const invalid = check(value);
    if (invalid !== null) return { ok: false, why: `invalid ${type}: ${invalid}` };
    return { ok: true, msg: value as T };
  };
}
