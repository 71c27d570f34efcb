// The MCP tools of POST /mcp/call, one entry per tool: arguments (already checked against the
// schema pack) in, the tool's result out. Mesh tools call the mesh service, approval and inbox
// tools the feed's approval service; the record tools still go through their REST routes
// with the caller's credential (docs/architecture.md, Known gaps).
import { ApprovalCreate, InboxSend } from '../../protocol/approvals.js';
import type { MeshState } from '../../protocol/mesh.js';
import type { Principal } from '../auth/principal.js';
import type { ApprovalService } from '../feed/approvals.js';
import { bodyCheck } from '../http/validation.js';
import type { MeshService } from '../mesh/service.js';

export interface ToolCall {
  principal: Principal;
  /** Validated against the tool's schema. */
  args: Record<string, unknown>;
  /** Calls a REST route of this tower with the caller's credential; the body, or the problem thrown. */
  forward(url: string, payload?: unknown): Promise<Record<string, unknown>>;
}

export type Tool = (call: ToolCall) => Promise<unknown>;

type Ids = {
  agent_id: string;
  mission_id: string;
  task_id: string;
  lease_id: string;
  reason: string;
  state?: string;
  domain_id: string;
  document_id: string;
  artifact_id: string;
};
const ids = (c: ToolCall) => c.args as Ids;
const path = (...parts: string[]) => parts.map(encodeURIComponent).join('/');
/** A record's own fields: the ids in its path are not part of its body. */
const recordBody = (c: ToolCall) => {
  const { domain_id: _d, mission_id: _m, ...body } = c.args;
  return body;
};

export function meshTools(mesh: MeshService): Record<string, Tool> {
  return {
    submit_mesh_task: async ({ principal, args }) => {
      const { mission_id, ...body } = args as { mission_id: string };
      return mesh.create(principal, mission_id, body as never);
    },
    claim_mesh_task: async (c) =>
      mesh.claim(c.principal, ids(c).agent_id, (c.args as { mission_id?: string }).mission_id),
    claim_mesh_tasks: async (c) => {
      const { mission_id, max } = c.args as { mission_id?: string; max: number };
      return { items: await mesh.claimMany(c.principal, ids(c).agent_id, mission_id, max) };
    },
    start_mesh_task: async (c) => mesh.start(c.principal, ids(c).task_id, ids(c).lease_id),
    heartbeat_mesh_task: async (c) => mesh.heartbeat(c.principal, ids(c).task_id, ids(c).lease_id),
    report_progress: async (c) => {
      await mesh.progress(c.principal, ids(c).task_id, ids(c).lease_id, c.args as never);
      return {};
    },
    complete_mesh_task: async (c) =>
      mesh.complete(c.principal, ids(c).task_id, ids(c).lease_id, (c.args as { result?: unknown }).result),
    complete_mesh_tasks: async (c) => ({
      items: await mesh.completeMany(
        c.principal,
        (c.args as { items: { task_id: string; lease_id: string; result?: unknown }[] }).items,
      ),
    }),
    fail_mesh_task: async (c) => mesh.fail(c.principal, ids(c).task_id, ids(c).lease_id, ids(c).reason),
    retry_mesh_task: async (c) => mesh.retry(c.principal, ids(c).task_id),
    get_mesh_task: async (c) => mesh.get(c.principal, ids(c).task_id),
    list_mesh_tasks: async (c) => {
      const { mission_id, state } = ids(c);
      return {
        items: await mesh.list(c.principal, mission_id, {
          ...(state ? { state: state as MeshState } : {}),
          limit: 500,
          after: null,
        }),
      };
    },
  };
}

/**
 * Approvals and inbox: the arguments are checked as the REST body is (a schema pack may be
 * looser than the route), then the same service the routes use runs with the caller.
 */
export function approvalTools(approvals: ApprovalService): Record<string, Tool> {
  const approval = bodyCheck(ApprovalCreate);
  const inbox = bodyCheck(InboxSend);
  return {
    request_approval: async (c) => {
      approval(c.args);
      return approvals.request(c.principal, c.args as ApprovalCreate);
    },
    send_inbox: async (c) => {
      inbox(c.args);
      return approvals.sendInbox(c.principal, c.args as InboxSend);
    },
  };
}

export const routeTools: Record<string, Tool> = {
  create_domain: (c) => c.forward('/domains', c.args),
  create_mission: (c) => c.forward(`/domains/${path(ids(c).domain_id)}/m`, recordBody(c)),
  create_document: (c) =>
    c.forward(`/domains/${path(ids(c).domain_id, 'm', ids(c).mission_id)}/documents`, recordBody(c)),
  create_artifact: (c) =>
    c.forward(`/domains/${path(ids(c).domain_id, 'm', ids(c).mission_id)}/artifacts`, recordBody(c)),
  get_domain: (c) => c.forward(`/domains/${path(ids(c).domain_id)}`),
  get_mission: (c) => c.forward(`/domains/${path(ids(c).domain_id, 'm', ids(c).mission_id)}`),
  get_document: (c) =>
    c.forward(`/domains/${path(ids(c).domain_id, 'm', ids(c).mission_id, 'documents', ids(c).document_id)}`),
  get_artifact: (c) =>
    c.forward(`/domains/${path(ids(c).domain_id, 'm', ids(c).mission_id, 'artifacts', ids(c).artifact_id)}`),
};
