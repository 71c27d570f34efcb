// Approvals (pending → approved | rejected, decided once) and inbox messages, each change
// written with its feed event in one transaction.
import type { FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import { newId } from '../../lib/ids.js';
import type { Approval, ApprovalCreate, InboxMessage, InboxSend } from '../../protocol/approvals.js';
import { SvcError } from '../../protocol/errors.js';
import { canSeeDomain, type Principal } from '../auth/principal.js';
import type { TowerApp } from '../http/app.js';
import { listInDomains } from '../records/access.js';
import type { AgentLookup } from '../secrets/agents.js';
import type { Store } from '../store/open.js';
import type { Tx, Write } from '../store/tx.js';
import type { ApprovalRow } from './migrations.js';
import { feedSchemas } from './schemas.js';

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

/** Asking for an approval and sending an inbox message: the routes' work, for MCP tools too. */
export interface ApprovalService {
  /** A pending approval in a domain the principal sees. */
  request(principal: Principal, body: ApprovalCreate): Promise<Approval>;
  /** A message to an agent, in its enrolled domain (or body.domain_id when it is not enrolled). */
  sendInbox(principal: Principal, body: InboxSend): Promise<InboxMessage>;
}

export function approvalService(deps: ApprovalRoutesDeps): ApprovalService {
  const visibleDomain = async (principal: Principal, domainId: string) => {
    const row = canSeeDomain(principal, domainId)
      ? await deps.store.db.selectFrom('domains').select('id').where('id', '=', domainId).executeTakeFirst()
      : undefined;
    if (!row) throw new SvcError('not_found', `domain ${domainId} not found`);
  };
  return {
    async request(principal, body) {
      await visibleDomain(principal, body.domain_id);
      return deps.write(async (tx) => {
        const a: Approval = {
          id: newId('apr', tx.nowMs),
          domain_id: body.domain_id,
          mission_id: body.mission_id ?? null,
          agent_id: body.agent_id ?? null,
          title: body.title,
          detail: body.detail ?? '',
          status: 'pending',
          reason: null,
          requested_by: principal.name,
          decided_by: null,
          created_at: tx.now,
          decided_at: null,
        };
        await tx.db.insertInto('approvals').values(a).execute();
        approvalEvent(tx, a, 'requested');
        return a;
      });
    },
    async sendInbox(principal, body) {
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
      await visibleDomain(principal, domainId);
      return deps.write(async (tx) => {
        const m: InboxMessage = {
          id: newId('msg', tx.nowMs),
          domain_id: domainId,
          agent_id: body.agent_id,
          text: body.text,
          sent_by: principal.name,
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
    },
  };
}

export const approvalRoutes = fp(
  async (app: TowerApp, deps: ApprovalRoutesDeps) => {
    const approvals = approvalService(deps);
    app.post('/approvals', {
      config: { scope: 'work:write' },
      schema: feedSchemas.createApproval,
      handler: async (req, reply) => reply.code(201).send(await approvals.request(req.principal, req.body)),
    });

    app.get('/approvals', {
      config: { scope: 'feed:read' },
      schema: feedSchemas.listApprovals,
      handler: async (req) => {
        const q = req.query;
        let sel = deps.store.db.selectFrom('approvals').selectAll();
        if (q.status) sel = sel.where('status', '=', q.status);
        return listInDomains(sel, req.principal, q, approvalOf);
      },
    });

    const load = async (
      req: FastifyRequest,
      id: string,
      db = deps.store.db as Tx['db'],
    ): Promise<ApprovalRow> => {
      const row = await db.selectFrom('approvals').selectAll().where('id', '=', id).executeTakeFirst();
      if (!row || !canSeeDomain(req.principal, row.domain_id)) {
        throw new SvcError('not_found', `approval ${id} not found`);
      }
      return row;
    };

    app.get('/approvals/:approval_id', {
      config: { scope: 'feed:read' },
      schema: feedSchemas.getApproval,
      handler: async (req) => approvalOf(await load(req, req.params.approval_id)),
    });

    for (const decision of ['approve', 'reject'] as const) {
      app.post(`/approvals/:approval_id/${decision}`, {
        config: { scope: 'work:write' },
        schema: feedSchemas.decideApproval(decision),
        handler: async (req) => {
          const body = req.body ?? {};
          return deps.write(async (tx) => {
            const row = await load(req, req.params.approval_id, tx.db);
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
      schema: feedSchemas.sendInbox,
      handler: async (req, reply) => reply.code(201).send(await approvals.sendInbox(req.principal, req.body)),
    });

    app.get('/inbox', {
      config: { scope: 'feed:read' },
      schema: feedSchemas.listInbox,
      handler: async (req) => {
        const q = req.query;
        let sel = deps.store.db.selectFrom('inbox_messages').selectAll();
        if (q.agent_id !== undefined) sel = sel.where('agent_id', '=', q.agent_id);
        return listInDomains(sel, req.principal, q, (m) => m);
      },
    });
  },
  { name: 'svc-approvals' },
);
