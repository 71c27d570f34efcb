// The node area's route schemas (http/route-schema.ts): what the tower asks a node over its
// control channel, and the channel itself. Shapes come from src/protocol.
import { Type } from '@sinclair/typebox';
import { AgentStatus } from '../../protocol/agents.js';
import { Id, IdParam } from '../../protocol/common.js';
import { NodeAgentAction, NodeStatus } from '../../protocol/nodes.js';
import { described, noContent, route } from '../http/route-schema.js';

/** What the node's svcd does when it cannot answer, besides its own codes. */
const NODE_ERRORS = ['not_found', 'node_offline', 'agent_not_found'] as const;

export const nodeSchemas = {
  status: route({
    summary: "A node's supervision and cron state",
    description: 'Asked of the node over its control channel (node.status); nothing is stored on the tower.',
    tags: ['nodes'],
    params: IdParam('node_id'),
    response: { 200: described(NodeStatus, 'as the node answered') },
    errors: [...NODE_ERRORS],
  }),
  agentAction: route({
    summary: 'Restart, pause or resume an agent on its node',
    tags: ['nodes'],
    params: Type.Object({ node_id: Id, agent_id: Id }, { additionalProperties: false }),
    body: NodeAgentAction,
    response: { 200: described(AgentStatus, "the agent's supervision state after the action") },
    errors: [...NODE_ERRORS, 'agent_not_running', 'config_invalid'],
  }),
  connect: route({
    summary: 'The node control channel (WebSocket, node JWT)',
    description: 'Messages: src/protocol/control.ts.',
    tags: ['nodes'],
    response: { 101: noContent('Switching Protocols: the control channel') },
  }),
};
