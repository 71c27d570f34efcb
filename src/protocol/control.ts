// The node control channel (docs/architecture.md): one WebSocket that svcd opens to the tower at
// GET /nodes/connect with "Authorization: Bearer <node JWT>". Text frames, one JSON message
// each. Liveness: both sides send WebSocket ping frames every HEARTBEAT_MS and close a
// channel that has been silent for DEAD_AFTER_MS.
import { type Static, Type } from './type.js';

export const CONTROL_PATH = '/nodes/connect';
export const HEARTBEAT_MS = 10_000;
export const DEAD_AFTER_MS = 30_000;

/** node → tower, first message after connecting; re-sent on every reconnect. */
export const Hello = Type.Object({
  type: Type.Literal('hello'),
  version: Type.String(),
  /** Fresh random secret per svcd start; the tower signs attach.open with it (HMAC-SHA256). */
  attach_secret: Type.String({ minLength: 32 }),
  /** Agents of this node that are running now, for presence. */
  agents: Type.Optional(
    Type.Array(Type.Object({ agent_id: Type.String(), status: Type.String() }), { maxItems: 10_000 }),
  ),
});
export type Hello = Static<typeof Hello>;

/** tower → node, answer to hello. */
export interface Welcome {
  type: 'welcome';
  node_id: string;
  heartbeat_ms: number;
}

/** tower → node: a task one of this node's agents could claim became claimable. */
export interface TaskReady {
  type: 'task_ready';
  task_id: string;
  mission_id: string;
  domain_id: string;
}

/** tower → node: a task running here was cancelled; stop its subagent. */
export interface TaskCancelled {
  type: 'task_cancelled';
  task_id: string;
}

/**
 * tower → node: open an attach stream. `sig` = HMAC-SHA256(attach_secret, attachSigningString(msg))
 * in hex; the node dials back GET /nodes/attach/{stream_id} with its JWT.
 */
export interface AttachOpen {
  type: 'attach.open';
  stream_id: string;
  agent_id: string;
  cols: number;
  rows: number;
  read_only: boolean;
  /** ms since epoch when the tower signed it; nodes refuse stale requests. */
  ts: number;
  sig: string;
  /** Who asked (the tower's principal), for the node's attach events; not signed. */
  who?: string;
}

export function attachSigningString(m: Omit<AttachOpen, 'sig' | 'type' | 'who'>): string {
  return ['attach.open', m.stream_id, m.agent_id, m.cols, m.rows, m.read_only ? 1 : 0, m.ts].join('\n');
}

/** node → tower: presence of one agent changed. */
export const AgentStatusMsg = Type.Object({
  type: Type.Literal('agent_status'),
  agent_id: Type.String(),
  status: Type.Union(['online', 'busy', 'idle', 'offline', 'errored'].map((s) => Type.Literal(s))),
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

export type TowerToNode = Welcome | TaskReady | TaskCancelled | AttachOpen | NodeRequest;
export type NodeToTower = Hello | AgentStatusMsg | NodeResponse;
