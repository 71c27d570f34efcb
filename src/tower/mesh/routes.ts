// The mesh area's REST routes: agent enrolment and listing, and mesh tasks (submit, list,
// read, retry, cancel). Every task operation goes through MeshService; no SQL of tasks here.
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { newId } from '../../lib/ids.js';
import { SvcError } from '../../protocol/errors.js';
import type { Agent } from '../../protocol/mesh.js';
import { canSeeDomain, type Principal } from '../auth/principal.js';
import { listInDomains } from '../records/access.js';
import { decodeCursor, page } from '../records/cursor.js';
import type { Write } from '../store/tx.js';
import type { Db } from '../store/types.js';
import type { AgentRow } from './migrations.js';
import { meshSchemas } from './schemas.js';
import type { MeshService } from './service.js';

export function agentOf(r: AgentRow): Agent {
  return {
    id: r.id,
    node_id: r.node_id,
    domain_id: r.domain_id,
    name: r.name,
    runtime: r.runtime,
    capabilities: JSON.parse(r.capabilities) as string[],
    status: r.status as Agent['status'],
    created_at: r.created_at,
    updated_at: r.updated_at,
  };
}

export interface MeshRoutesOptions {
  mesh: MeshService;
  db: Db;
  write: Write;
}

export const meshRoutes: FastifyPluginAsyncTypebox<MeshRoutesOptions> = async (app, { mesh, db, write }) => {
  app.post('/agents', {
    config: { scope: 'work:write' },
    schema: meshSchemas.enrollAgent,
    handler: async (req, reply) => {
      const nodeId = req.principal.nodeId;
      if (!nodeId) {
        throw new SvcError(
          'forbidden',
          'agents are enrolled by their node: run "svc daemon agent enroll" on it',
        );
      }
      const body = req.body;
      if (!canSeeDomain(req.principal, body.domain_id)) {
        throw new SvcError('not_found', `domain ${body.domain_id} not found`);
      }
      const agent = await write(async (tx) => {
        const d = await tx.db
          .selectFrom('domains')
          .select('id')
          .where('id', '=', body.domain_id)
          .executeTakeFirst();
        if (!d) throw new SvcError('not_found', `domain ${body.domain_id} not found`);
        const row: AgentRow = {
          id: newId('ag', tx.nowMs),
          node_id: nodeId,
          domain_id: body.domain_id,
          name: body.name ?? body.runtime,
          runtime: body.runtime,
          capabilities: JSON.stringify(body.capabilities ?? []),
          status: 'idle',
          created_at: tx.now,
          updated_at: tx.now,
        };
        await tx.db.insertInto('agents').values(row).execute();
        const a = agentOf(row);
        tx.emit({
          type: 'matrix',
          domain_id: a.domain_id,
          agent_id: a.id,
          status: a.status,
          payload: { entity: 'agent', action: 'enrolled', id: a.id, node_id: a.node_id, runtime: a.runtime },
        });
        return a;
      });
      return reply.code(201).send(agent);
    },
  });

  app.get('/agents', {
    config: { scope: 'feed:read' },
    schema: meshSchemas.listAgents,
    handler: async (req) => {
      const q = req.query;
      let sel = db.selectFrom('agents').selectAll();
      if (q.node_id) sel = sel.where('node_id', '=', q.node_id);
      return listInDomains(sel, req.principal, q, agentOf);
    },
  });

  const loadAgent = async (principal: Principal, id: string) => {
    const row = await db.selectFrom('agents').selectAll().where('id', '=', id).executeTakeFirst();
    if (!row || !canSeeDomain(principal, row.domain_id))
      throw new SvcError('agent_not_found', `agent ${id} not found`);
    return row;
  };

  app.get('/agents/:agent_id', {
    config: { scope: 'feed:read' },
    schema: meshSchemas.getAgent,
    handler: async (req) => agentOf(await loadAgent(req.principal, req.params.agent_id)),
  });

  app.delete('/agents/:agent_id', {
    config: { scope: 'work:write' },
    schema: meshSchemas.deleteAgent,
    handler: async (req, reply) => {
      const row = await loadAgent(req.principal, req.params.agent_id);
      if (req.principal.nodeId !== undefined && row.node_id !== req.principal.nodeId) {
        throw new SvcError('forbidden', `agent ${row.id} belongs to another node`);
      }
      await write(async (tx) => {
        await tx.db.deleteFrom('agents').where('id', '=', row.id).execute();
        tx.emit({
          type: 'matrix',
          domain_id: row.domain_id,
          agent_id: row.id,
          payload: { entity: 'agent', action: 'removed', id: row.id, node_id: row.node_id },
        });
      });
      return reply.code(204).send();
    },
  });

  app.post('/work/missions/:mission_id/tasks', {
    config: { scope: 'work:write' },
    schema: meshSchemas.createTask,
    handler: async (req, reply) => {
      const t = await mesh.create(req.principal, req.params.mission_id, req.body);
      return reply.code(201).send(t);
    },
  });

  app.get('/work/missions/:mission_id/tasks', {
    config: { scope: 'feed:read' },
    schema: meshSchemas.listTasks,
    handler: async (req) => {
      const q = req.query;
      const limit = q.limit ?? 50;
      const rows = await mesh.list(req.principal, req.params.mission_id, {
        ...(q.state ? { state: q.state } : {}),
        limit,
        after: decodeCursor(q.cursor),
      });
      return page(rows, limit);
    },
  });

  app.get('/work/tasks/:task_id', {
    config: { scope: 'feed:read' },
    schema: meshSchemas.getTask,
    handler: async (req) => mesh.get(req.principal, req.params.task_id),
  });

  app.post('/work/tasks/:task_id/retry', {
    config: { scope: 'work:write' },
    schema: meshSchemas.retryTask,
    handler: async (req) => mesh.retry(req.principal, req.params.task_id),
  });

  app.post('/work/tasks/:task_id/cancel', {
    config: { scope: 'work:write' },
    schema: meshSchemas.cancelTask,
    handler: async (req) => mesh.cancel(req.principal, req.params.task_id),
  });
};
