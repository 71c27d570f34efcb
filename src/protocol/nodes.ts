// Wire shapes of node registration (docs/api.md, Nodes; docs/operator-guide.md, 3).

import { AgentStatus } from './agents.js';
import { Id, Timestamp } from './common.js';
import { CronList } from './cron.js';
import { type Static, Type } from './type.js';

export const Hostname = Type.String({
  minLength: 1,
  maxLength: 253,
  pattern: '^[A-Za-z0-9]([A-Za-z0-9.-]*[A-Za-z0-9])?$',
});

export const NodeRegister = Type.Object(
  {
    hostname: Hostname,
    /** Re-register an existing hostname: rotates its JWT (the old one stops working). */
    force: Type.Optional(Type.Boolean()),
  },
  { additionalProperties: false },
);
export type NodeRegister = Static<typeof NodeRegister>;

export const Node = Type.Object({
  id: Id,
  hostname: Type.String(),
  domains: Type.Union([Type.Array(Id), Type.Null()]),
  online: Type.Boolean(),
  created_at: Timestamp,
  updated_at: Timestamp,
});
export type Node = Static<typeof Node>;

export const NodeRegistered = Type.Composite([Node, Type.Object({ jwt: Type.String() })]);
export type NodeRegistered = Static<typeof NodeRegistered>;

/** The node identity file (/etc/svc/node.json), written 0600 by `svc agent node register`. */
export interface NodeIdentity {
  node_id: string;
  hostname: string;
  backend_url: string;
  jwt: string;
}

/** POST /nodes/{node}/agents/{agent}/actions: what to do with a supervised agent. */
export const NODE_AGENT_ACTIONS = ['restart', 'pause', 'resume'] as const;
export const NodeAgentAction = Type.Object(
  { action: Type.Union(NODE_AGENT_ACTIONS.map((a) => Type.Literal(a))) },
  { additionalProperties: false },
);
export type NodeAgentAction = Static<typeof NodeAgentAction>;

/**
 * GET /nodes/{id}/status: what the node's svcd answers to node.status (its agent.list items
 * and its cron.list), asked over the control channel, with the node's id and hostname.
 */
export const NodeStatus = Type.Object({
  node_id: Id,
  hostname: Type.String(),
  agents: Type.Array(AgentStatus),
  cron: CronList,
});
export type NodeStatus = Static<typeof NodeStatus>;
