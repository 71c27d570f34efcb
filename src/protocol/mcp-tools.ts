// The agent tools of POST /mcp/call (docs/mesh.md, MCP tools): name, description, the scope a
// caller needs, and the argument schema (the embedded schema pack). The tower dispatches on
// these names; svcd's `svcd mcp` and mgmt.sock `mcp.call` list and validate them.

import { Id } from './common.js';
import { TOOL_ARGS } from './mesh.js';
import { ArtifactCreate, DocumentCreate, DomainCreate, MissionCreate } from './records.js';
import type { Scope } from './scopes.js';
import { type TSchema, Type } from './type.js';

const closed = { additionalProperties: false } as const;
const withIds = (ids: Record<string, TSchema>, body: TSchema) =>
  Type.Composite([Type.Object(ids), body], closed);

/** Record tools: the REST create bodies plus the ids of the path they hang off. */
export const RECORD_TOOL_ARGS = {
  create_domain: DomainCreate,
  create_mission: withIds({ domain_id: Id }, MissionCreate),
  create_document: withIds({ domain_id: Id, mission_id: Id }, DocumentCreate),
  create_artifact: withIds({ domain_id: Id, mission_id: Id }, ArtifactCreate),
  get_domain: Type.Object({ domain_id: Id }, closed),
  get_mission: Type.Object({ domain_id: Id, mission_id: Id }, closed),
  get_document: Type.Object({ domain_id: Id, mission_id: Id, document_id: Id }, closed),
  get_artifact: Type.Object({ domain_id: Id, mission_id: Id, artifact_id: Id }, closed),
} as const;

/** Deciding approvals (an operator's credential: a node may only reject). */
const Decision = Type.Object(
  { approval_id: Id, reason: Type.Optional(Type.String({ maxLength: 2000 })) },
  closed,
);
export const APPROVAL_TOOL_ARGS = {
  approve_approval: Decision,
  reject_approval: Decision,
  get_approval: Type.Object({ approval_id: Id }, closed),
} as const;

/** Embedded default arguments of every tool (a schema pack may replace any of them). */
export const MCP_TOOL_ARGS: Record<McpToolName, TSchema> = {
  ...TOOL_ARGS,
  ...RECORD_TOOL_ARGS,
  ...APPROVAL_TOOL_ARGS,
};

export type McpToolName =
  | keyof typeof TOOL_ARGS
  | keyof typeof RECORD_TOOL_ARGS
  | keyof typeof APPROVAL_TOOL_ARGS;

export interface McpToolInfo {
  description: string;
  /** What the caller's credential needs on the tower. */
  scope: Scope;
}

export const MCP_TOOLS: Record<McpToolName, McpToolInfo> = {
  submit_mesh_task: {
    description: 'Submit a mesh task to a mission; returns the task.',
    scope: 'work:write',
  },
  claim_mesh_task: {
    description: 'Claim the next mesh task for an agent; returns {task, lease_id, lease_seconds} or null.',
    scope: 'work:write',
  },
  claim_mesh_tasks: {
    description:
      'Claim up to max mesh tasks at once for an agent, best first, each with its own lease; returns {items: [{task, lease_id, lease_seconds}]}.',
    scope: 'work:write',
  },
  start_mesh_task: { description: 'Start a claimed mesh task (claimed → running).', scope: 'work:write' },
  heartbeat_mesh_task: {
    description: 'Extend the lease of a mesh task; returns {lease_expires_at}.',
    scope: 'work:write',
  },
  report_progress: {
    description: 'Report progress on a running mesh task (feed event).',
    scope: 'work:write',
  },
  complete_mesh_task: { description: 'Complete a mesh task with an optional result.', scope: 'work:write' },
  complete_mesh_tasks: {
    description:
      'Complete several mesh tasks at once; returns {items: [{task_id, ok: true, updated_at} or {task_id, ok: false, code, detail}]} in the order given.',
    scope: 'work:write',
  },
  fail_mesh_task: { description: 'Fail a mesh task with a reason.', scope: 'work:write' },
  retry_mesh_task: { description: 'Send a failed mesh task back to pending.', scope: 'work:write' },
  get_mesh_task: { description: 'Read one mesh task.', scope: 'feed:read' },
  list_mesh_tasks: {
    description: 'List the mesh tasks of a mission, optionally by state.',
    scope: 'feed:read',
  },
  request_approval: {
    description: 'Ask a human for an approval; returns the pending approval.',
    scope: 'work:write',
  },
  approve_approval: {
    description: 'Approve a pending approval (final); a task subagent waiting on it gets its tool call.',
    scope: 'work:write',
  },
  reject_approval: {
    description: 'Reject a pending approval (final) with an optional reason.',
    scope: 'work:write',
  },
  get_approval: { description: 'Read one approval.', scope: 'feed:read' },
  send_inbox: { description: "Send a message to an agent's inbox.", scope: 'work:write' },
  create_domain: { description: 'Create a domain (needs an admin credential).', scope: 'admin' },
  create_mission: { description: 'Create a mission in a domain.', scope: 'work:write' },
  create_document: { description: 'Create a document in a mission.', scope: 'work:write' },
  create_artifact: { description: 'Record an artifact of a mission.', scope: 'work:write' },
  get_domain: { description: 'Read one domain.', scope: 'feed:read' },
  get_mission: { description: 'Read one mission.', scope: 'feed:read' },
  get_document: { description: 'Read one document.', scope: 'feed:read' },
  get_artifact: { description: 'Read one artifact.', scope: 'feed:read' },
};

export function isMcpToolName(s: string): s is McpToolName {
  return Object.hasOwn(MCP_TOOLS, s);
}
