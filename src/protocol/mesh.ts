// Enrolled agents and mesh tasks (docs/mesh.md, docs/api.md): the claimable
// work queue and the MCP tool arguments that drive it.

import { MissionAgentPolicy } from './agent-policy.js';
import { Id, Timestamp } from './common.js';
import { RuntimeKindSchema } from './runtimes.js';
import { type Static, type TSchema, Type } from './type.js';

const Capability = Type.String({ minLength: 1, maxLength: 100, pattern: '^[A-Za-z0-9_.:/-]+$' });
const Capabilities = Type.Array(Capability, { maxItems: 100, uniqueItems: true });

export const AGENT_STATUSES = ['online', 'busy', 'idle', 'offline', 'errored'] as const;
export type AgentPresence = (typeof AGENT_STATUSES)[number];

export const Agent = Type.Object({
  id: Type.String(),
  node_id: Type.String(),
  domain_id: Type.String(),
  name: Type.String(),
  runtime: Type.String(),
  capabilities: Type.Array(Type.String()),
  status: Type.Union(AGENT_STATUSES.map((s) => Type.Literal(s))),
  created_at: Timestamp,
  updated_at: Timestamp,
});
export type Agent = Static<typeof Agent>;

export const AgentEnroll = Type.Object(
  {
    domain_id: Id,
    runtime: RuntimeKindSchema,
    name: Type.Optional(Type.String({ minLength: 1, maxLength: 200 })),
    capabilities: Type.Optional(Capabilities),
  },
  { additionalProperties: false },
);
export type AgentEnroll = Static<typeof AgentEnroll>;

export const AgentListQuery = Type.Object(
  {
    node_id: Type.Optional(Id),
    domain_id: Type.Optional(Id),
    limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 500, default: 50 })),
    cursor: Type.Optional(Type.String({ maxLength: 200 })),
  },
  { additionalProperties: false },
);
export type AgentListQuery = Static<typeof AgentListQuery>;

export const CLAIM_POLICIES = ['first_claim', 'assigned', 'broadcast'] as const;
export type ClaimPolicy = (typeof CLAIM_POLICIES)[number];
export const MESH_STATES = ['pending', 'claimed', 'running', 'completed', 'failed', 'cancelled'] as const;
export type MeshState = (typeof MESH_STATES)[number];

const lit = <T extends string>(xs: readonly T[]) => Type.Union(xs.map((x) => Type.Literal(x)));

export const MeshTask = Type.Object({
  id: Type.String(),
  mission_id: Type.String(),
  domain_id: Type.String(),
  title: Type.String(),
  description: Type.String(),
  claim_policy: lit(CLAIM_POLICIES),
  priority: Type.Integer(),
  assigned_agent_id: Type.Union([Type.String(), Type.Null()]),
  required_capabilities: Type.Array(Type.String()),
  state: lit(MESH_STATES),
  attempt: Type.Integer(),
  max_attempts: Type.Integer(),
  lease_seconds: Type.Integer(),
  claimed_by: Type.Union([Type.String(), Type.Null()]),
  result: Type.Unknown(),
  failure_reason: Type.Union([Type.String(), Type.Null()]),
  /** Broadcast runs: the task they run for; null on ordinary tasks. */
  parent_id: Type.Union([Type.String(), Type.Null()]),
  created_at: Timestamp,
  updated_at: Timestamp,
});
export type MeshTask = Static<typeof MeshTask>;

export const MeshTaskCreate = Type.Object(
  {
    title: Type.String({ minLength: 1, maxLength: 500 }),
    description: Type.Optional(Type.String({ maxLength: 100_000 })),
    claim_policy: Type.Optional(lit(CLAIM_POLICIES)),
    priority: Type.Optional(Type.Integer({ minimum: -1000, maximum: 1000 })),
    assigned_agent_id: Type.Optional(Id),
    required_capabilities: Type.Optional(Capabilities),
    max_attempts: Type.Optional(Type.Integer({ minimum: 1, maximum: 100 })),
    lease_seconds: Type.Optional(Type.Integer({ minimum: 5, maximum: 86_400 })),
  },
  { additionalProperties: false },
);
export type MeshTaskCreate = Static<typeof MeshTaskCreate>;

export const MeshTaskListQuery = Type.Object(
  {
    state: Type.Optional(lit(MESH_STATES)),
    limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 500, default: 50 })),
    cursor: Type.Optional(Type.String({ maxLength: 200 })),
  },
  { additionalProperties: false },
);
export type MeshTaskListQuery = Static<typeof MeshTaskListQuery>;

export interface Claimed {
  task: MeshTask;
  lease_id: string;
  lease_seconds: number;
}

/** What a run needs of its task's mission, read when the task starts (docs/mesh.md). */
export const MissionRunSettings = Type.Object({
  /** A local path svcd makes the run's git worktree from, or null. */
  repository: Type.Union([Type.String(), Type.Null()]),
  /** The mission's permission policy override (docs/agents.md), or null. */
  agent_policy: Type.Union([MissionAgentPolicy, Type.Null()]),
});
export type MissionRunSettings = Static<typeof MissionRunSettings>;

/** The answer of start_mesh_task: the running task and its mission's run settings. */
export interface StartedTask extends MeshTask {
  mission: MissionRunSettings;
}

const obj = <P extends Record<string, TSchema>>(p: P) => Type.Object(p, { additionalProperties: false });
const TaskLease = { task_id: Id, lease_id: Type.String({ minLength: 1, maxLength: 100 }) };

/** Arguments of each MCP tool (the embedded schema pack). */
export const TOOL_ARGS = {
  submit_mesh_task: Type.Composite([obj({ mission_id: Id }), MeshTaskCreate], {
    additionalProperties: false,
  }),
  claim_mesh_task: obj({ agent_id: Id, mission_id: Type.Optional(Id) }),
  claim_mesh_tasks: obj({
    agent_id: Id,
    mission_id: Type.Optional(Id),
    max: Type.Integer({ minimum: 1, maximum: 100 }),
  }),
  start_mesh_task: obj(TaskLease),
  heartbeat_mesh_task: obj(TaskLease),
  report_progress: obj({
    ...TaskLease,
    message: Type.String({ maxLength: 10_000 }),
    percent: Type.Optional(Type.Number({ minimum: 0, maximum: 100 })),
    data: Type.Optional(Type.Record(Type.String(), Type.Unknown())),
  }),
  complete_mesh_task: obj({ ...TaskLease, result: Type.Optional(Type.Unknown()) }),
  complete_mesh_tasks: obj({
    items: Type.Array(obj({ ...TaskLease, result: Type.Optional(Type.Unknown()) }), {
      minItems: 1,
      maxItems: 100,
    }),
  }),
  fail_mesh_task: obj({ ...TaskLease, reason: Type.String({ minLength: 1, maxLength: 10_000 }) }),
  retry_mesh_task: obj({ task_id: Id }),
  get_mesh_task: obj({ task_id: Id }),
  list_mesh_tasks: obj({ mission_id: Id, state: Type.Optional(lit(MESH_STATES)) }),
  request_approval: obj({
    domain_id: Id,
    mission_id: Type.Optional(Id),
    agent_id: Type.Optional(Id),
    title: Type.String({ minLength: 1, maxLength: 500 }),
    detail: Type.Optional(Type.String({ maxLength: 20_000 })),
  }),
  send_inbox: obj({
    agent_id: Id,
    text: Type.String({ minLength: 1, maxLength: 20_000 }),
    domain_id: Type.Optional(Id),
  }),
} as const;
export type ToolName = keyof typeof TOOL_ARGS;

export const McpCall = Type.Object(
  { tool: Type.String({ minLength: 1, maxLength: 100 }), args: Type.Record(Type.String(), Type.Unknown()) },
  { additionalProperties: false },
);
export type McpCall = Static<typeof McpCall>;
