// Approvals (an agent asks, an operator decides once) and inbox messages (an operator or a
// peer writes to an agent). docs/feed.md, Approvals and inbox; events of type approval / inbox.

import { TOOL_KINDS } from './agent-policy.js';
import { Id, Timestamp } from './common.js';
import { type Static, Type } from './type.js';

const NullableId = Type.Union([Id, Type.Null()]);

export const APPROVAL_STATUSES = ['pending', 'approved', 'rejected'] as const;
export type ApprovalStatus = (typeof APPROVAL_STATUSES)[number];

/** An ACP permission option (allow_once, allow_always, reject_once, reject_always). */
export const ApprovalOption = Type.Object(
  {
    option_id: Type.String({ minLength: 1, maxLength: 200 }),
    name: Type.String({ maxLength: 500 }),
    kind: Type.String({ maxLength: 50 }),
  },
  { additionalProperties: false },
);
export type ApprovalOption = Static<typeof ApprovalOption>;

/** The tool call a task's subagent asked permission for (docs/agents.md, Permission policy). */
export const ApprovalToolCall = Type.Object(
  {
    kind: Type.Union(TOOL_KINDS.map((k) => Type.Literal(k))),
    title: Type.String({ maxLength: 1000 }),
    /** The call's input (command, paths, …) as JSON text: capped, with secret-looking values removed. */
    input: Type.String({ maxLength: 4000 }),
    options: Type.Array(ApprovalOption, { maxItems: 20 }),
    /** Which policy rule asked ("node rule 2", "default (safe)"). */
    rule: Type.String({ maxLength: 200 }),
  },
  { additionalProperties: false },
);
export type ApprovalToolCall = Static<typeof ApprovalToolCall>;

export const Approval = Type.Object({
  id: Type.String(),
  domain_id: Type.String(),
  mission_id: Type.Union([Type.String(), Type.Null()]),
  agent_id: Type.Union([Type.String(), Type.Null()]),
  title: Type.String(),
  detail: Type.String(),
  /** Set when a task's subagent asked (with tool_call); the node waits for the decision. */
  task_id: Type.Union([Type.String(), Type.Null()]),
  node_id: Type.Union([Type.String(), Type.Null()]),
  tool_call: Type.Union([ApprovalToolCall, Type.Null()]),
  status: Type.Union(APPROVAL_STATUSES.map((s) => Type.Literal(s))),
  reason: Type.Union([Type.String(), Type.Null()]),
  requested_by: Type.String(),
  decided_by: Type.Union([Type.String(), Type.Null()]),
  created_at: Timestamp,
  decided_at: Type.Union([Timestamp, Type.Null()]),
});
export type Approval = Static<typeof Approval>;

export const ApprovalCreate = Type.Object(
  {
    domain_id: Id,
    mission_id: Type.Optional(NullableId),
    agent_id: Type.Optional(NullableId),
    title: Type.String({ minLength: 1, maxLength: 500 }),
    detail: Type.Optional(Type.String({ maxLength: 20_000 })),
    task_id: Type.Optional(Id),
    tool_call: Type.Optional(ApprovalToolCall),
  },
  { additionalProperties: false },
);
export type ApprovalCreate = Static<typeof ApprovalCreate>;

export const ApprovalDecide = Type.Object(
  { reason: Type.Optional(Type.String({ maxLength: 2000 })) },
  { additionalProperties: false },
);
export type ApprovalDecide = Static<typeof ApprovalDecide>;

export const ApprovalListQuery = Type.Object(
  {
    domain_id: Type.Optional(Id),
    status: Type.Optional(Type.Union(APPROVAL_STATUSES.map((s) => Type.Literal(s)))),
    task_id: Type.Optional(Id),
    limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 500, default: 50 })),
    cursor: Type.Optional(Type.String({ maxLength: 200 })),
  },
  { additionalProperties: false },
);
export type ApprovalListQuery = Static<typeof ApprovalListQuery>;

export const InboxMessage = Type.Object({
  id: Type.String(),
  domain_id: Type.String(),
  agent_id: Type.String(),
  text: Type.String(),
  sent_by: Type.String(),
  created_at: Timestamp,
});
export type InboxMessage = Static<typeof InboxMessage>;

export const InboxSend = Type.Object(
  {
    agent_id: Id,
    text: Type.String({ minLength: 1, maxLength: 20_000 }),
    /** Needed when the agent is not enrolled on the tower (its domain cannot be looked up). */
    domain_id: Type.Optional(Id),
  },
  { additionalProperties: false },
);
export type InboxSend = Static<typeof InboxSend>;

export const InboxListQuery = Type.Object(
  {
    agent_id: Type.Optional(Id),
    domain_id: Type.Optional(Id),
    limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 500, default: 50 })),
    cursor: Type.Optional(Type.String({ maxLength: 200 })),
  },
  { additionalProperties: false },
);
export type InboxListQuery = Static<typeof InboxListQuery>;
