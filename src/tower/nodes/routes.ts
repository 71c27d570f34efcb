// Operator views and actions that the tower forwards to a node over its control channel
// (node.request → node.response, src/protocol/control.ts): the node's supervision and cron
// state, and restart/pause/resume of a supervised agent. The tower decides who may ask; the
// node decides what happens (its supervisor and cron answer exactly as on mgmt.sock). A node
// whose channel another replica holds is asked through that replica (nodes/forward.ts).

import type { FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import type { AgentStatus } from '../../protocol/agents.js';
import { NODE_REQUEST_TIMEOUT_MS } from '../../protocol/control.js';
import { SvcError } from '../../protocol/errors.js';
import type { NodeStatus } from '../../protocol/nodes.js';
import { visibleNode } from '../access/routes.js';
import { canSeeDomain, type Principal } from '../auth/principal.js';
import type { TowerApp } from '../http/app.js';
import { type AgentLookup, agentsTableLookup } from '../secrets/agents.js';
import type { Store } from '../store/open.js';
import type { ControlHub } from './control-hub.js';
import { forwarded, forwardRequest } from './forward.js';
import type { Presence } from './presence.js';
import { nodeSchemas } from './schemas.js';

/** The node's answer as it came: the response schema documents it, and strips nothing. */
const relayed = () => (data: unknown) => JSON.stringify(data);

/** What the node request routes use: the control channels, and the store to check nodes. */
export interface NodeRequestDeps {
  hub: ControlHub;
  store: Store;
  agents?: AgentLookup;
  /** Where other replicas' channels are (several replicas); none: this replica only. */
  presence?: Presence;
}

export const nodeRequestRoutes = fp(
  async (app: TowerApp, deps: NodeRequestDeps) => {
    const { hub } = deps;
    const agents = deps.agents ?? agentsTableLookup;
    /**
     * Where the node's channel is, when not here: the replica to hand the request to, or null
     * (here, or nowhere: hub.request then answers node_offline).
     */
    const elsewhere = async (req: FastifyRequest, nodeId: string) => {
      const { presence } = deps;
      if (hub.isOnline(nodeId) || !presence || forwarded(req)) return null;
      const holder = await presence.holder(nodeId);
      return holder && holder.replicaId !== presence.replicaId ? holder : null;
    };
    const hop = { timeoutMs: NODE_REQUEST_TIMEOUT_MS + 2000 };
    const loadNode = async (p: Principal, id: string) => {
      if (p.kind === 'node') throw new SvcError('forbidden', 'nodes cannot ask nodes: use an operator token');
      const row = await deps.store.db.selectFrom('nodes').selectAll().where('id', '=', id).executeTakeFirst();
      if (!row || !visibleNode(p, row)) throw new SvcError('not_found', `node ${id} not found`);
      return row;
    };

    app.get('/nodes/:node_id/status', {
      config: { scope: 'feed:read' },
      schema: nodeSchemas.status,
      // Relayed as the node answered: a node of another version may say more or less.
      serializerCompiler: relayed,
      handler: async (req, reply) => {
        // Where the channel is, asked with the node's row rather than after it: a request that
        // crosses replicas waits for one store round trip less (a node not found or not
        // visible is refused all the same, whatever the other lookup said).
        const [row, there] = await Promise.all([
          loadNode(req.principal, req.params.node_id),
          elsewhere(req, req.params.node_id),
        ]);
        if (there) return forwardRequest(there, req, reply, { ...hop, what: `node ${row.id}` });
        const result = (await hub.request(row.id, 'node.status', {})) as Omit<
          NodeStatus,
          'node_id' | 'hostname'
        >;
        return { node_id: row.id, hostname: row.hostname, ...result };
      },
    });

    app.post('/nodes/:node_id/agents/:agent_id/actions', {
      config: { scope: 'work:write' },
      schema: nodeSchemas.agentAction,
      serializerCompiler: relayed,
      handler: async (req, reply) => {
        const params = req.params;
        const [row, there] = await Promise.all([
          loadNode(req.principal, params.node_id),
          elsewhere(req, params.node_id),
        ]);
        // Same rule as attach: an enrolled agent must be on this node and in a visible domain;
        // one only in the node's agents.toml is for credentials that see every domain.
        const enrolled = await agents(deps.store.db, params.agent_id);
        if (enrolled && enrolled.node_id !== row.id)
          throw new SvcError('agent_not_found', `agent ${params.agent_id} is not on node ${row.id}`);
        if (enrolled ? !canSeeDomain(req.principal, enrolled.domain_id) : req.principal.domains !== null)
          throw new SvcError('agent_not_found', `agent ${params.agent_id} not found`);
        if (there) return forwardRequest(there, req, reply, { ...hop, what: `node ${row.id}` });
        const { action } = req.body;
        return (await hub.request(row.id, `agent.${action}`, { id: params.agent_id })) as AgentStatus;
      },
    });
  },
  { name: 'svc-node-requests' },
);
