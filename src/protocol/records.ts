// Wire shapes of the tower's records (docs/api.md, Records): domains, missions, regular
// (Kanban) tasks, documents, artifacts. One schema each for the record, its create body and
// its patch body; types come from the schemas.

import { MissionAgentPolicy } from './agent-policy.js';
import { BIGINT_RANGE, Id, LongText, Name, Timestamp } from './common.js';
import { type Static, Type } from './type.js';

const closed = { additionalProperties: false } as const;

export const Domain = Type.Object({
  id: Id,
  name: Name,
  description: Type.String(),
  created_at: Timestamp,
  updated_at: Timestamp,
});
export type Domain = Static<typeof Domain>;
export const DomainCreate = Type.Object({ name: Name, description: Type.Optional(LongText) }, closed);
export type DomainCreate = Static<typeof DomainCreate>;
export const DomainPatch = Type.Object(
  { name: Type.Optional(Name), description: Type.Optional(LongText) },
  { ...closed, minProperties: 1 },
);
export type DomainPatch = Static<typeof DomainPatch>;

const Repository = Type.Union([Type.String({ minLength: 1, maxLength: 4096 }), Type.Null()]);

export const Mission = Type.Object({
  id: Id,
  domain_id: Id,
  name: Name,
  description: Type.String(),
  repository: Repository,
  /** Overrides the nodes' permission policy for this mission's task runs (docs/agents.md). */
  agent_policy: Type.Union([MissionAgentPolicy, Type.Null()]),
  created_at: Timestamp,
  updated_at: Timestamp,
});
export type Mission = Static<typeof Mission>;
export const MissionCreate = Type.Object(
  {
    name: Name,
    description: Type.Optional(LongText),
    repository: Type.Optional(Repository),
    agent_policy: Type.Optional(Type.Union([MissionAgentPolicy, Type.Null()])),
  },
  closed,
);
export type MissionCreate = Static<typeof MissionCreate>;
export const MissionPatch = Type.Object(
  {
    name: Type.Optional(Name),
    description: Type.Optional(LongText),
    repository: Type.Optional(Repository),
    agent_policy: Type.Optional(Type.Union([MissionAgentPolicy, Type.Null()])),
  },
  { ...closed, minProperties: 1 },
);
export type MissionPatch = Static<typeof MissionPatch>;

export const BOARD_STATUSES = ['todo', 'doing', 'done'] as const;
export const BoardStatus = Type.Union(BOARD_STATUSES.map((s) => Type.Literal(s)));
export type BoardStatus = (typeof BOARD_STATUSES)[number];

/** A regular (Kanban) task: tracking only, never dispatched to workers. */
export const BoardTask = Type.Object({
  id: Id,
  domain_id: Id,
  mission_id: Id,
  title: Name,
  description: Type.String(),
  status: BoardStatus,
  created_at: Timestamp,
  updated_at: Timestamp,
});
export type BoardTask = Static<typeof BoardTask>;
export const BoardTaskCreate = Type.Object(
  { title: Name, description: Type.Optional(LongText), status: Type.Optional(BoardStatus) },
  closed,
);
export type BoardTaskCreate = Static<typeof BoardTaskCreate>;
export const BoardTaskPatch = Type.Object(
  { title: Type.Optional(Name), description: Type.Optional(LongText), status: Type.Optional(BoardStatus) },
  { ...closed, minProperties: 1 },
);
export type BoardTaskPatch = Static<typeof BoardTaskPatch>;

export const Document = Type.Object({
  id: Id,
  domain_id: Id,
  mission_id: Id,
  title: Name,
  content_type: Type.String(),
  content: Type.String(),
  created_at: Timestamp,
  updated_at: Timestamp,
});
export type Document = Static<typeof Document>;
export const DocumentCreate = Type.Object(
  {
    title: Name,
    content_type: Type.Optional(Type.String({ minLength: 1, maxLength: 200 })),
    content: Type.String({ maxLength: 512 * 1024 }),
  },
  closed,
);
export type DocumentCreate = Static<typeof DocumentCreate>;
export const DocumentPatch = Type.Object(
  {
    title: Type.Optional(Name),
    content_type: Type.Optional(Type.String({ minLength: 1, maxLength: 200 })),
    content: Type.Optional(Type.String({ maxLength: 512 * 1024 })),
  },
  { ...closed, minProperties: 1 },
);
export type DocumentPatch = Static<typeof DocumentPatch>;

const Metadata = Type.Record(Type.String(), Type.Unknown());

export const Artifact = Type.Object({
  id: Id,
  domain_id: Id,
  mission_id: Id,
  name: Name,
  uri: Type.Union([Type.String(), Type.Null()]),
  content_type: Type.Union([Type.String(), Type.Null()]),
  size_bytes: Type.Union([Type.Integer(), Type.Null()]),
  metadata: Metadata,
  created_at: Timestamp,
  updated_at: Timestamp,
});
export type Artifact = Static<typeof Artifact>;
export const ArtifactCreate = Type.Object(
  {
    name: Name,
    uri: Type.Optional(Type.String({ minLength: 1, maxLength: 4096 })),
    content_type: Type.Optional(Type.String({ minLength: 1, maxLength: 200 })),
    size_bytes: Type.Optional(Type.Integer({ minimum: 0, maximum: BIGINT_RANGE.maximum })),
    metadata: Type.Optional(Metadata),
  },
  closed,
);
export type ArtifactCreate = Static<typeof ArtifactCreate>;
export const ArtifactPatch = Type.Object(
  {
    name: Type.Optional(Name),
    uri: Type.Optional(Type.String({ minLength: 1, maxLength: 4096 })),
    content_type: Type.Optional(Type.String({ minLength: 1, maxLength: 200 })),
    size_bytes: Type.Optional(Type.Integer({ minimum: 0, maximum: BIGINT_RANGE.maximum })),
    metadata: Type.Optional(Metadata),
  },
  { ...closed, minProperties: 1 },
);
export type ArtifactPatch = Static<typeof ArtifactPatch>;
