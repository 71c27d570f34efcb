// Approvals (pending → approved | rejected, decided once) and inbox messages, each change
// written with its feed event in one transaction.
import fp from 'fastify-plugin';
import { newId } from '../../lib/ids.js';
import type {
  Approval,
  ApprovalCreate,
  ApprovalDecide,
  ApprovalToolCall,
  InboxMessage,
  InboxSend,
} from '../../protocol/approvals.js';
import { SvcError } from '../../protocol/errors.js';
import { canSeeDomain, type Principal } from '../auth/principal.js';
import type { TowerApp } from '../http/app.js';
import type { TaskRelay } from '../nodes/task-relay.js';
import { listInDomains } from '../records/access.js';
import type { AgentLookup } from '../secrets/agents.js';
import type { Store } from '../store/open.js';
import type { Tx, Write } from '../store/tx.js';
import type { ApprovalRow } from './migrations.js';
import { feedSchemas } from './schemas.js';

function approvalOf(r: ApprovalRow): Approval {
  return { ...r, tool_call: r.tool_call === null ? null : (JSON.parse(r.tool_call) as ApprovalToolCall) };
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
      ...(a.task_id !== null ? { task_id: a.task_id } : {}),
      ...(a.tool_call !== null ? { tool_call: { kind: a.tool_call.kind, title: a.tool_call.title } } : {}),
    },
  });
}

/** What the approval and inbox routes use. */
export interface ApprovalRoutesDeps {
  store: Store;
  write: Write;
  agents: AgentLookup;
  /** Tells a node waiting on an approval its decision (approval_decided), through whichever
   * replica holds its channel. */
  notices: Pick<TaskRelay, 'approvalDecided'>;
}

/** Asking for an approval and sending an inbox message: the routes' work, for MCP tools too. */
export interface ApprovalService {
  /** A pending approval in a domain the principal sees. */
  request(principal: Principal, body: ApprovalCreate): Promise<Approval>;
  /** A message to an agent, in its enrolled domain (or body.domain_id when it is not enrolled). */
  sendInbox(principal: Principal, body: InboxSend): Promise<InboxMessage>;
  /** One approval the principal sees. */
  get(principal: Principal, id: string): Promise<Approval>;
  /** Decides a pending approval once; tells the node waiting on it. */
  decide(
    principal: Principal,
    id: string,
    decision: 'approve' | 'reject',
    body: ApprovalDecide,
  ): Promise<Approval>;
}

export function approvalService(deps: ApprovalRoutesDeps): ApprovalService {
  const visibleDomain = async (principal: Principal, domainId: string) => {
    const row = canSeeDomain(principal, domainId)
      ? await deps.store.db.selectFrom('domains').select('id').where('id', '=', domainId).executeTakeFirst()
      : undefined;
    if (!row) throw new SvcError('not_found', `domain ${domainId} not found`);
  };
  const load = async (
    principal: Principal,
    id: string,
    db = deps.store.db as Tx['db'],
  ): Promise<ApprovalRow> => {
    const row = await db.selectFrom('approvals').selectAll().where('id', '=', id).executeTakeFirst();
    if (!row || !canSeeDomain(principal, row.domain_id)) {
      throw new SvcError('not_found', `approval ${id} not found`);
    }
    return row;
  };
  return {
    async get(principal, id) {
      return approvalOf(await load(principal, id));
    },
    async decide(principal, id, decision, body) {
      // A node only ever rejects (its subagent's question timed out): it never approves
      // what its own agents asked.
      if (decision === 'approve' && principal.kind === 'node') {
        throw new SvcError('forbidden', 'a node cannot approve: an operator decides approvals');
      }
      const decided = await deps.write(async (tx) => {
        const row = await load(principal, id, tx.db);
        const status = decision === 'approve' ? 'approved' : 'rejected';
        // The status check is in the UPDATE itself, so two deciders racing on two
        // replicas cannot both win.
        const res = await tx.db
          .updateTable('approvals')
          .set({ status, reason: body.reason ?? null, decided_by: principal.name, decided_at: tx.now })
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
          ...approvalOf(row),
          status,
          reason: body.reason ?? null,
          decided_by: principal.name,
          decided_at: tx.now,
        };
        approvalEvent(tx, a, status);
        return a;
      });
      // After the commit: the node waiting on it hears now, through whichever replica holds
      // its channel (docs/agents.md); it also polls the approval.
      if (decided.node_id !== null) {
        deps.notices.approvalDecided({
          node_id: decided.node_id,
          approval_id: decided.id,
          status: decided.status as 'approved' | 'rejected',
          reason: decided.reason,
        });
      }
      return decided;
    },
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
          task_id: body.task_id ?? null,
          // A node asks for its subagents: the decision goes back to it (approval_decided).
          node_id: principal.nodeId ?? null,
          tool_call: body.tool_call ?? null,
          status: 'pending',
          reason: null,
          requested_by: principal.name,
          decided_by: null,
          created_at: tx.now,
          decided_at: null,
        };
        await tx.db
          .insertInto('approvals')
          .values({ ...a, tool_call: a.tool_call === null ? null : JSON.stringify(a.tool_call) })
          .execute();
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
        if (q.task_id) sel = sel.where('task_id', '=', q.task_id);
        return listInDomains(sel, req.principal, q, approvalOf);
      },
    });

    app.get('/approvals/:approval_id', {
      config: { scope: 'feed:read' },
      schema: feedSchemas.getApproval,
      handler: async (req) => approvals.get(req.principal, req.params.approval_id),
    });

    for (const decision of ['approve', 'reject'] as const) {
      app.post(`/approvals/:approval_id/${decision}`, {
        config: { scope: 'work:write' },
        schema: feedSchemas.decideApproval(decision),
        handler: async (req) =>
          approvals.decide(req.principal, req.params.approval_id, decision, req.body ?? {}),
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
