// Operator views and actions that the tower forwards to a node over its control channel
// (node.request → node.response, src/protocol/control.ts): the node's supervision and cron
// state, and restart/pause/resume of a supervised agent. The tower decides who may ask; the
// node decides what happens (its supervisor and cron answer exactly as on mgmt.sock).

import fp from 'fastify-plugin';
import type { AgentStatus } from '../../protocol/agents.js';
import { SvcError } from '../../protocol/errors.js';
import type { NodeStatus } from '../../protocol/nodes.js';
import { canSeeDomain, type Principal } from '../auth/principal.js';
import { visibleNode } from '../credentials/routes.js';
import type { TowerApp } from '../http/app.js';
import { type AgentLookup, agentsTableLookup } from '../secrets/agents.js';
import type { Store } from '../store/open.js';
import type { ControlHub } from './control-hub.js';
import { nodeSchemas } from './schemas.js';

/** The node's answer as it came: the response schema documents it, and strips nothing. */
const relayed = () => (data: unknown) => JSON.stringify(data);

/** What the node request routes use: the control channels, and the store to check nodes. */
export interface NodeRequestDeps {
  hub: ControlHub;
  store: Store;
  agents?: AgentLookup;
}

export const nodeRequestRoutes = fp(
  async (app: TowerApp, deps: NodeRequestDeps) => {
    const { hub } = deps;
    const agents = deps.agents ?? agentsTableLookup;
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
      handler: async (req) => {
        const row = await loadNode(req.principal, req.params.node_id);
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
      handler: async (req) => {
        const params = req.params;
        const row = await loadNode(req.principal, params.node_id);
        // Same rule as attach: an enrolled agent must be on this node and in a visible domain;
        // one only in the node's agents.toml is for credentials that see every domain.
        const enrolled = await agents(deps.store.db, params.agent_id);
        if (enrolled && enrolled.node_id !== row.id)
          throw new SvcError('agent_not_found', `agent ${params.agent_id} is not on node ${row.id}`);
        if (enrolled ? !canSeeDomain(req.principal, enrolled.domain_id) : req.principal.domains !== null)
          throw new SvcError('agent_not_found', `agent ${params.agent_id} not found`);
        const { action } = req.body;
        return (await hub.request(row.id, `agent.${action}`, { id: params.agent_id })) as AgentStatus;
      },
    });
  },
  { name: 'svc-node-requests' },
);
