// The MCP tools of POST /mcp/call, one entry per tool: arguments (already checked against the
// schema pack) in, the tool's result out. Each calls the service its REST route calls: the
// mesh service, the feed's approval service, a record collection. Arguments are checked as
// the route's body is, as a schema pack may be looser than the route.
import { ApprovalCreate, ApprovalDecide, InboxSend } from '../../protocol/approvals.js';
import type { MeshState } from '../../protocol/mesh.js';
import type { Principal } from '../auth/principal.js';
import type { ApprovalService } from '../feed/approvals.js';
import { requireTowerWide } from '../http/auth-hook.js';
import { bodyCheck } from '../http/validation.js';
import type { MeshService } from '../mesh/service.js';
import type { RecordCollections } from '../records/routes.js';

export interface ToolCall {
  principal: Principal;
  /** Validated against the tool's schema. */
  args: Record<string, unknown>;
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
const PATH_IDS = ['domain_id', 'mission_id', 'document_id', 'artifact_id'] as const;
/** The ids a record's REST path would name, as path parameters (text). */
const pathIds = (args: Record<string, unknown>): Record<string, string> =>
  Object.fromEntries(PATH_IDS.filter((k) => args[k] !== undefined).map((k) => [k, String(args[k])]));

const approvalId = (c: ToolCall) => (c.args as { approval_id: string }).approval_id;
const decisionCheck = bodyCheck(ApprovalDecide);
/** The decision's own fields (the REST body), checked as the route checks them. */
const decisionOf = (c: ToolCall): ApprovalDecide => {
  const { approval_id: _a, ...body } = c.args;
  decisionCheck(body);
  return body as ApprovalDecide;
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
    get_approval: async (c) => approvals.get(c.principal, approvalId(c)),
    approve_approval: async (c) => approvals.decide(c.principal, approvalId(c), 'approve', decisionOf(c)),
    reject_approval: async (c) => approvals.decide(c.principal, approvalId(c), 'reject', decisionOf(c)),
  };
}

/** Records: create and get by id, as POST and GET of the collection's routes. */
export function recordTools(records: RecordCollections): Record<string, Tool> {
  const collection = (entity: string) => {
    const c = records[entity];
    if (!c) throw new Error(`no record collection ${entity}`);
    return c;
  };
  const create = (entity: string): Tool => {
    const c = collection(entity);
    const check = bodyCheck(c.spec.schemas.create);
    return async ({ principal, args }) => {
      // Domains are tower-wide, as their route says (config.towerWide).
      if (c.spec.parent === 'none') requireTowerWide(principal);
      // A record's own fields: the parents' ids are its path, not its body.
      const { domain_id: _d, mission_id: _m, ...fields } = args;
      const body = c.spec.parent === 'none' ? args : fields;
      check(body);
      return c.create(principal, pathIds(args), body);
    };
  };
  const get =
    (entity: string): Tool =>
    async ({ principal, args }) =>
      collection(entity).get(principal, pathIds(args));
  return {
    create_domain: create('domain'),
    create_mission: create('mission'),
    create_document: create('document'),
    create_artifact: create('artifact'),
    get_domain: get('domain'),
    get_mission: get('mission'),
    get_document: get('document'),
    get_artifact: get('artifact'),
  };
}
