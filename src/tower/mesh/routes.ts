// Mesh routes: agent enrolment, mesh tasks over REST, the MCP tool endpoint, and the lease
// sweeper.
import type { FastifyInstance } from 'fastify';
import type { TimerHandle } from '../../lib/clock.js';
import { newId } from '../../lib/ids.js';
import { IdParam } from '../../protocol/common.js';
import { SvcError } from '../../protocol/errors.js';
import {
  type Agent,
  AgentEnroll,
  AgentListQuery,
  type MeshState,
  MeshTaskCreate,
  MeshTaskListQuery,
} from '../../protocol/mesh.js';
import { canSeeDomain, type Principal } from '../auth/principal.js';
import type { TowerContext } from '../context.js';
import type { TowerPlugin } from '../http/app.js';
import { listInDomains } from '../records/access.js';
import { decodeCursor, page } from '../records/cursor.js';
import { storeFault } from '../store/faults.js';
import { mcpRoutes } from './mcp.js';
import type { AgentRow } from './migrations.js';
import { type MeshHooks, MeshService } from './service.js';

export const SWEEP_EVERY_MS = 1000;

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

export interface MeshArea {
  plugin: TowerPlugin;
  service(ctx: TowerContext): MeshService;
  /** Starts the lease sweeper; its stop resolves once an in-flight sweep has finished. */
  startSweeper(ctx: TowerContext): () => Promise<void>;
}

export function meshArea(hooks: MeshHooks = {}): MeshArea {
  let svc: MeshService | null = null;
  const service = (ctx: TowerContext) => {
    svc ??= new MeshService(ctx, hooks);
    return svc;
  };
  const plugin: TowerPlugin = async (app: FastifyInstance, ctx: TowerContext) => {
    const mesh = service(ctx);

    app.post('/agents', {
      config: { scope: 'work:write' },
      schema: { body: AgentEnroll },
      handler: async (req, reply) => {
        const nodeId = req.principal.nodeId;
        if (!nodeId) {
          throw new SvcError(
            'forbidden',
            'agents are enrolled by their node: run "svc daemon agent enroll" on it',
          );
        }
        const body = req.body as AgentEnroll;
        if (!canSeeDomain(req.principal, body.domain_id)) {
          throw new SvcError('not_found', `domain ${body.domain_id} not found`);
        }
        const agent = await ctx.write(async (tx) => {
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
            payload: {
              entity: 'agent',
              action: 'enrolled',
              id: a.id,
              node_id: a.node_id,
              runtime: a.runtime,
            },
          });
          return a;
        });
        return reply.code(201).send(agent);
      },
    });

    app.get('/agents', {
      config: { scope: 'feed:read' },
      schema: { querystring: AgentListQuery },
      handler: async (req) => {
        const q = req.query as AgentListQuery;
        let sel = ctx.store.db.selectFrom('agents').selectAll();
        if (q.node_id) sel = sel.where('node_id', '=', q.node_id);
        return listInDomains(sel, req.principal, q, agentOf);
      },
    });

    const loadAgent = async (principal: Principal, id: string) => {
      const row = await ctx.store.db.selectFrom('agents').selectAll().where('id', '=', id).executeTakeFirst();
      if (!row || !canSeeDomain(principal, row.domain_id))
        throw new SvcError('agent_not_found', `agent ${id} not found`);
      return row;
    };

    app.get('/agents/:agent_id', {
      config: { scope: 'feed:read' },
      schema: { params: IdParam('agent_id') },
      handler: async (req) =>
        agentOf(await loadAgent(req.principal, (req.params as { agent_id: string }).agent_id)),
    });

    app.delete('/agents/:agent_id', {
      config: { scope: 'work:write' },
      schema: { params: IdParam('agent_id') },
      handler: async (req, reply) => {
        const row = await loadAgent(req.principal, (req.params as { agent_id: string }).agent_id);
        if (req.principal.nodeId !== undefined && row.node_id !== req.principal.nodeId) {
          throw new SvcError('forbidden', `agent ${row.id} belongs to another node`);
        }
        await ctx.write(async (tx) => {
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
      schema: { params: IdParam('mission_id'), body: MeshTaskCreate },
      handler: async (req, reply) => {
        const t = await mesh.create(
          req.principal,
          (req.params as { mission_id: string }).mission_id,
          req.body as MeshTaskCreate,
        );
        return reply.code(201).send(t);
      },
    });

    app.get('/work/missions/:mission_id/tasks', {
      config: { scope: 'feed:read' },
      schema: { params: IdParam('mission_id'), querystring: MeshTaskListQuery },
      handler: async (req) => {
        const q = req.query as MeshTaskListQuery;
        const limit = q.limit ?? 50;
        const rows = await mesh.list(req.principal, (req.params as { mission_id: string }).mission_id, {
          ...(q.state ? { state: q.state as MeshState } : {}),
          limit,
          after: decodeCursor(q.cursor),
        });
        return page(rows, limit);
      },
    });

    app.get('/work/tasks/:task_id', {
      config: { scope: 'feed:read' },
      schema: { params: IdParam('task_id') },
      handler: async (req) => mesh.get(req.principal, (req.params as { task_id: string }).task_id),
    });

    app.post('/work/tasks/:task_id/retry', {
      config: { scope: 'work:write' },
      schema: { params: IdParam('task_id') },
      handler: async (req) => mesh.retry(req.principal, (req.params as { task_id: string }).task_id),
    });

    app.post('/work/tasks/:task_id/cancel', {
      config: { scope: 'work:write' },
      schema: { params: IdParam('task_id') },
      handler: async (req) => mesh.cancel(req.principal, (req.params as { task_id: string }).task_id),
    });

    await mcpRoutes(app, ctx, mesh);
  };
  return {
    plugin,
    service,
    startSweeper(ctx) {
      let timer: TimerHandle | null = null;
      let stopped = false;
      let inFlight: Promise<void> | null = null;
      let storeDown = false;
      const sweepOnce = async () => {
        try {
          await service(ctx).sweep();
          storeDown = false;
        } catch (e) {
          // A store fault is logged by the store's health; here once per outage.
          const fault = storeFault(e);
          if (!fault) ctx.log.warn({ err: e }, 'mesh lease sweep failed; retrying');
          else if (!storeDown) {
            storeDown = true;
            ctx.log.warn(
              { cause: fault.cause },
              'mesh lease sweep failed: the store is not writable; retrying',
            );
          }
        }
      };
      const tick = () => {
        timer = ctx.clock.setTimeout(async () => {
          inFlight = sweepOnce();
          await inFlight;
          inFlight = null;
          if (!stopped) tick();
        }, SWEEP_EVERY_MS);
      };
      tick();
      // Stopping waits for a sweep already running, so it never touches a closed store.
      return async () => {
        stopped = true;
        timer?.cancel();
        await inFlight;
      };
    },
  };
}
