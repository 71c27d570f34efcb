// The record collections of DESIGN §3: domains, missions, regular (Kanban) tasks,
// documents and artifacts. Regular tasks are tracking only; nothing here dispatches work.
import type { FastifyInstance } from 'fastify';
import type { Artifact, BoardTask, Document, Domain, Mission } from '../../protocol/records.js';
import * as R from '../../protocol/records.js';
import type { TowerContext } from '../context.js';
import type { TowerPlugin } from '../http/app.js';
import { registerCollection } from './collection.js';

type Row = Record<string, unknown>;

const pick = (body: Row, keys: string[]): Row => {
  const out: Row = {};
  for (const k of keys) if (body[k] !== undefined) out[k] = body[k];
  return out;
};

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

/**
 * The record routes. `missionChildren` names tables of other areas (mesh tasks) that also
 * hang off a mission, so deleting a mission refuses or cascades over them too.
 */
export function recordRoutes(missionChildren: ChildTable[] = []): TowerPlugin {
  return (app, ctx) => registerRecords(app, ctx, [...MISSION_CHILDREN, ...missionChildren]);
}

function registerRecords(app: FastifyInstance, ctx: TowerContext, missionChildren: ChildTable[]): void {
  registerCollection<Domain>(app, ctx, {
    entity: 'domain',
    table: 'domains',
    idPrefix: 'dom',
    parent: 'none',
    basePath: '/domains',
    idParam: 'domain_id',
    schemas: { record: R.Domain, create: R.DomainCreate, patch: R.DomainPatch },
    createScope: 'admin',
    fromRow: (r) => ({
      id: r.id as string,
      name: r.name as string,
      description: r.description as string,
      created_at: r.created_at as string,
      updated_at: r.updated_at as string,
    }),
    toRow: (b, base) => ({ ...base, name: b.name, description: b.description ?? '' }),
    toPatch: (b) => pick(b, ['name', 'description']),
    summary: (d) => ({ name: d.name }),
    children: [{ table: 'missions', column: 'domain_id', noun: 'missions' }],
  });

  registerCollection<Mission>(app, ctx, {
    entity: 'mission',
    table: 'missions',
    idPrefix: 'mis',
    parent: 'domain',
    basePath: '/domains/:domain_id/m',
    idParam: 'mission_id',
    schemas: { record: R.Mission, create: R.MissionCreate, patch: R.MissionPatch },
    createScope: 'work:write',
    fromRow: (r) => ({
      id: r.id as string,
      domain_id: r.domain_id as string,
      name: r.name as string,
      description: r.description as string,
      repository: (r.repository as string | null) ?? null,
      created_at: r.created_at as string,
      updated_at: r.updated_at as string,
    }),
    toRow: (b, base) => ({
      ...base,
      name: b.name,
      description: b.description ?? '',
      repository: b.repository ?? null,
    }),
    toPatch: (b) => pick(b, ['name', 'description', 'repository']),
    summary: (m) => ({ name: m.name }),
    children: missionChildren,
  });

  registerCollection<BoardTask>(app, ctx, {
    entity: 'task',
    table: 'board_tasks',
    idPrefix: 'tsk',
    parent: 'mission',
    basePath: '/domains/:domain_id/m/:mission_id/t',
    idParam: 'task_id',
    schemas: { record: R.BoardTask, create: R.BoardTaskCreate, patch: R.BoardTaskPatch },
    createScope: 'work:write',
    fromRow: (r) => ({
      id: r.id as string,
      domain_id: r.domain_id as string,
      mission_id: r.mission_id as string,
      title: r.title as string,
      description: r.description as string,
      status: r.status as BoardTask['status'],
      created_at: r.created_at as string,
      updated_at: r.updated_at as string,
    }),
    toRow: (b, base) => ({
      ...base,
      title: b.title,
      description: b.description ?? '',
      status: b.status ?? 'todo',
    }),
    toPatch: (b) => pick(b, ['title', 'description', 'status']),
    summary: (t) => ({ title: t.title, status: t.status }),
  });

  registerCollection<Document>(app, ctx, {
    entity: 'document',
    table: 'documents',
    idPrefix: 'doc',
    parent: 'mission',
    basePath: '/domains/:domain_id/m/:mission_id/documents',
    idParam: 'document_id',
    schemas: { record: R.Document, create: R.DocumentCreate, patch: R.DocumentPatch },
    createScope: 'work:write',
    fromRow: (r) => ({
      id: r.id as string,
      domain_id: r.domain_id as string,
      mission_id: r.mission_id as string,
      title: r.title as string,
      content_type: r.content_type as string,
      content: r.content as string,
      created_at: r.created_at as string,
      updated_at: r.updated_at as string,
    }),
    toRow: (b, base) => ({
      ...base,
      title: b.title,
      content_type: b.content_type ?? 'text/markdown',
      content: b.content,
    }),
    toPatch: (b) => pick(b, ['title', 'content_type', 'content']),
    summary: (d) => ({ title: d.title }),
  });

  registerCollection<Artifact>(app, ctx, {
    entity: 'artifact',
    table: 'artifacts',
    idPrefix: 'art',
    parent: 'mission',
    basePath: '/domains/:domain_id/m/:mission_id/artifacts',
    idParam: 'artifact_id',
    schemas: { record: R.Artifact, create: R.ArtifactCreate, patch: R.ArtifactPatch },
    createScope: 'work:write',
    fromRow: (r) => ({
      id: r.id as string,
      domain_id: r.domain_id as string,
      mission_id: r.mission_id as string,
      name: r.name as string,
      uri: (r.uri as string | null) ?? null,
      content_type: (r.content_type as string | null) ?? null,
      size_bytes: r.size_bytes === null || r.size_bytes === undefined ? null : Number(r.size_bytes),
      metadata:
        typeof r.metadata === 'string' ? (JSON.parse(r.metadata) as Row) : ((r.metadata as Row) ?? {}),
      created_at: r.created_at as string,
      updated_at: r.updated_at as string,
    }),
    toRow: (b, base) => ({
      ...base,
      name: b.name,
      uri: b.uri ?? null,
      content_type: b.content_type ?? null,
      size_bytes: b.size_bytes ?? null,
      metadata: JSON.stringify(b.metadata ?? {}),
    }),
    toPatch: (b) => {
      const p = pick(b, ['name', 'uri', 'content_type', 'size_bytes']);
      if (b.metadata !== undefined) p.metadata = JSON.stringify(b.metadata);
      return p;
    },
    summary: (a) => ({ name: a.name }),
  });
}
