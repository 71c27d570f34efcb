// The record collections of docs/api.md: domains, missions, regular (Kanban) tasks,
// documents and artifacts. Regular tasks are tracking only; nothing here dispatches work.
import fp from 'fastify-plugin';
import * as R from '../../protocol/records.js';
import type { TowerApp } from '../http/app.js';
import {
  type CollectionSpec,
  type FieldCodec,
  type RecordCollection,
  type RecordDeps,
  recordCollection,
  registerCollection,
} from './collection.js';

const MISSION_CHILDREN = [
  { table: 'board_tasks', column: 'mission_id', noun: 'tasks' },
  { table: 'documents', column: 'mission_id', noun: 'documents' },
  { table: 'artifacts', column: 'mission_id', noun: 'artifacts' },
];

export interface ChildTable {
  table: string;
  column: string;
  noun: string;
}

export interface RecordRoutesDeps extends RecordDeps {
  /**
   * Tables of other areas (mesh tasks) that also hang off a mission, so deleting a mission
   * refuses or cascades over them too.
   */
  missionChildren?: ChildTable[];
}

/** The collections by entity: domain, mission, task, document, artifact. */
export type RecordCollections = Record<string, RecordCollection>;

/** Built once by the composition root, for the routes and the MCP record tools. */
export function recordCollections(deps: RecordRoutesDeps): RecordCollections {
  const specs = recordSpecs([...MISSION_CHILDREN, ...(deps.missionChildren ?? [])]);
  return Object.fromEntries(specs.map((spec) => [spec.entity, recordCollection(deps, spec)]));
}

/** The record routes, a plugin registered by the composition root. */
export const recordRoutes = fp(
  async (app: TowerApp, deps: { collections: RecordCollections }) => {
    for (const c of Object.values(deps.collections)) registerCollection(app, c);
  },
  { name: 'svc-records' },
);

const json: FieldCodec = {
  encode: (v) => JSON.stringify(v),
  decode: (v) => (typeof v === 'string' ? JSON.parse(v) : v),
};
/** bigint columns come back from PostgreSQL as decimal strings. */
const integer: FieldCodec = { encode: (v) => v, decode: (v) => Number(v) };

function recordSpecs(missionChildren: ChildTable[]): CollectionSpec[] {
  return [
    {
      entity: 'domain',
      table: 'domains',
      idPrefix: 'dom',
      parent: 'none',
      basePath: '/domains',
      idParam: 'domain_id',
      schemas: { record: R.Domain, create: R.DomainCreate, patch: R.DomainPatch },
      createScope: 'admin',
      defaults: { description: '' },
      summary: ['name'],
      children: [{ table: 'missions', column: 'domain_id', noun: 'missions' }],
    },
    {
      entity: 'mission',
      table: 'missions',
      idPrefix: 'mis',
      parent: 'domain',
      basePath: '/domains/:domain_id/m',
      idParam: 'mission_id',
      schemas: { record: R.Mission, create: R.MissionCreate, patch: R.MissionPatch },
      createScope: 'work:write',
      defaults: { description: '', repository: null, agent_policy: null },
      codecs: { agent_policy: json },
      summary: ['name'],
      children: missionChildren,
    },
    {
      entity: 'task',
      table: 'board_tasks',
      idPrefix: 'tsk',
      parent: 'mission',
      basePath: '/domains/:domain_id/m/:mission_id/t',
      idParam: 'task_id',
      schemas: { record: R.BoardTask, create: R.BoardTaskCreate, patch: R.BoardTaskPatch },
      createScope: 'work:write',
      defaults: { description: '', status: 'todo' },
      summary: ['title', 'status'],
    },
    {
      entity: 'document',
      table: 'documents',
      idPrefix: 'doc',
      parent: 'mission',
      basePath: '/domains/:domain_id/m/:mission_id/documents',
      idParam: 'document_id',
      schemas: { record: R.Document, create: R.DocumentCreate, patch: R.DocumentPatch },
      createScope: 'work:write',
      defaults: { content_type: 'text/markdown' },
      summary: ['title'],
    },
    {
      entity: 'artifact',
      table: 'artifacts',
      idPrefix: 'art',
      parent: 'mission',
      basePath: '/domains/:domain_id/m/:mission_id/artifacts',
      idParam: 'artifact_id',
      schemas: { record: R.Artifact, create: R.ArtifactCreate, patch: R.ArtifactPatch },
      createScope: 'work:write',
      defaults: { uri: null, content_type: null, size_bytes: null, metadata: {} },
      codecs: { metadata: json, size_bytes: integer },
      summary: ['name'],
    },
  ];
}
