// Approvals (pending → approved | rejected, decided once) and inbox messages, each change
// written with its feed event in one transaction.
import type { FastifyInstance, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import { newId } from '../../lib/ids.js';
import {
  type Approval,
  ApprovalCreate,
  ApprovalDecide,
  ApprovalListQuery,
  InboxListQuery,
  type InboxMessage,
  InboxSend,
} from '../../protocol/approvals.js';
import { IdParam } from '../../protocol/common.js';
import { SvcError } from '../../protocol/errors.js';
import { canSeeDomain } from '../auth/principal.js';
import { listInDomains } from '../records/access.js';
import type { AgentLookup } from '../secrets/agents.js';
import type { Store } from '../store/open.js';
import type { Tx, Write } from '../store/tx.js';
import type { ApprovalRow } from './migrations.js';

function approvalOf(r: ApprovalRow): Approval {
  return { ...r };
}

function approvalEvent(tx: Tx, a: Approval, action: 'requested' | 'approved' | 'rejected'): void {
  tx.emit({
    type: 'approval',
    domain_id: a.domain_id,
    mission_id: a.mission_id,
    agent_id: a.agent_id,
    status: a.status,
    payload: {
      action,
      id: a.id,
      title: a.title,
      status: a.status,
      ...(a.reason !== null ? { reason: a.reason } : {}),
      ...(a.decided_by !== null ? { decided_by: a.decided_by } : {}),
    },
  });
}

/** What the approval and inbox routes use. */
export interface ApprovalRoutesDeps {
  store: Store;
  write: Write;
  agents: AgentLookup;
}

export const approvalRoutes = fp(
  async (app: FastifyInstance, deps: ApprovalRoutesDeps) => {
    const visibleDomain = async (req: FastifyRequest, domainId: string) => {
      const row = canSeeDomain(req.principal, domainId)
        ? await deps.store.db.selectFrom('domains').select('id').where('id', '=', domainId).executeTakeFirst()
        : undefined;
      if (!row) throw new SvcError('not_found', `domain ${domainId} not found`);
    };

    app.post('/approvals', {
      config: { scope: 'work:write' },
      schema: { body: ApprovalCreate },
      handler: async (req, reply) => {
        const body = req.body as ApprovalCreate;
        await visibleDomain(req, body.domain_id);
        const approval = await deps.write(async (tx) => {
          const a: Approval = {
            id: newId('apr', tx.nowMs),
            domain_id: body.domain_id,
            mission_id: body.mission_id ?? null,
            agent_id: body.agent_id ?? null,
            title: body.title,
            detail: body.detail ?? '',
            status: 'pending',
            reason: null,
            requested_by: req.principal.name,
            decided_by: null,
            created_at: tx.now,
            decided_at: null,
          };
          await tx.db.insertInto('approvals').values(a).execute();
          approvalEvent(tx, a, 'requested');
          return a;
        });
        return reply.code(201).send(approval);
      },
    });

    app.get('/approvals', {
      config: { scope: 'feed:read' },
      schema: { querystring: ApprovalListQuery },
      handler: async (req) => {
        const q = req.query as ApprovalListQuery;
        let sel = deps.store.db.selectFrom('approvals').selectAll();
        if (q.status) sel = sel.where('status', '=', q.status);
        return listInDomains(sel, req.principal, q, approvalOf);
      },
    });

    const load = async (req: FastifyRequest, db = deps.store.db as Tx['db']): Promise<ApprovalRow> => {
      const id = (req.params as { approval_id: string }).approval_id;
      const row = await db.selectFrom('approvals').selectAll().where('id', '=', id).executeTakeFirst();
      if (!row || !canSeeDomain(req.principal, row.domain_id)) {
        throw new SvcError('not_found', `approval ${id} not found`);
      }
      return row;
    };

    app.get('/approvals/:approval_id', {
      config: { scope: 'feed:read' },
      schema: { params: IdParam('approval_id') },
      handler: async (req) => approvalOf(await load(req)),
    });

    for (const decision of ['approve', 'reject'] as const) {
      app.post(`/approvals/:approval_id/${decision}`, {
        config: { scope: 'work:write' },
        schema: { params: IdParam('approval_id'), body: ApprovalDecide },
        handler: async (req) => {
          const body = (req.body ?? {}) as ApprovalDecide;
          return deps.write(async (tx) => {
            const row = await load(req, tx.db);
            const status = decision === 'approve' ? 'approved' : 'rejected';
            // The status check is in the UPDATE itself, so two deciders racing on two
            // replicas cannot both win.
            const res = await tx.db
              .updateTable('approvals')
              .set({
                status,
                reason: body.reason ?? null,
                decided_by: req.principal.name,
                decided_at: tx.now,
              })
              .where('id', '=', row.id)
              .where('status', '=', 'pending')
              .executeTakeFirst();
            if (Number(res.numUpdatedRows) !== 1) {
              throw new SvcError(
                'already_decided',
                `approval ${row.id} was already ${row.status}; a decision is final`,
              );
            }
            const a: Approval = {
              ...row,
              status,
              reason: body.reason ?? null,
              decided_by: req.principal.name,
              decided_at: tx.now,
            };
            approvalEvent(tx, a, status);
            return a;
          });
        },
      });
    }

    app.post('/inbox', {
      config: { scope: 'work:write' },
      schema: { body: InboxSend },
      handler: async (req, reply) => {
        const body = req.body as InboxSend;
        const enrolled = await deps.agents(deps.store.db, body.agent_id);
        const domainId = enrolled?.domain_id ?? body.domain_id;
        if (domainId === undefined) {
          throw new SvcError(
            'agent_not_found',
            `agent ${body.agent_id} is not enrolled on the tower: pass domain_id to address it anyway`,
          );
        }
        if (enrolled && body.domain_id !== undefined && body.domain_id !== enrolled.domain_id) {
          throw new SvcError('not_found', `agent ${body.agent_id} not found in domain ${body.domain_id}`);
        }
        await visibleDomain(req, domainId);
        const message = await deps.write(async (tx) => {
          const m: InboxMessage = {
            id: newId('msg', tx.nowMs),
            domain_id: domainId,
            agent_id: body.agent_id,
            text: body.text,
            sent_by: req.principal.name,
            created_at: tx.now,
          };
          await tx.db.insertInto('inbox_messages').values(m).execute();
          tx.emit({
            type: 'inbox',
            domain_id: domainId,
            agent_id: body.agent_id,
            payload: { id: m.id, text: m.text, sent_by: m.sent_by },
          });
          return m;
        });
        return reply.code(201).send(message);
      },
    });

    app.get('/inbox', {
      config: { scope: 'feed:read' },
      schema: { querystring: InboxListQuery },
      handler: async (req) => {
        const q = req.query as InboxListQuery;
        let sel = deps.store.db.selectFrom('inbox_messages').selectAll();
        if (q.agent_id !== undefined) sel = sel.where('agent_id', '=', q.agent_id);
        return listInDomains(sel, req.principal, q, (m) => m);
      },
    });
  },
  { name: 'svc-approvals' },
);
