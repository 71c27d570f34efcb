// One REST collection of records (create, get, list, patch, delete) under a domain or a
// mission. Domains, missions, regular tasks, documents and artifacts differ only in their
// table, columns and parent, so they share this one implementation.
import type { TObject } from '@sinclair/typebox';
import type { Kysely } from 'kysely';
import { iso } from '../../lib/clock.js';
import { newId } from '../../lib/ids.js';
import { SvcError } from '../../protocol/errors.js';
import type { NewEvent } from '../../protocol/events.js';
import type { Scope } from '../../protocol/scopes.js';
import { canSeeDomain, type Principal } from '../auth/principal.js';
import type { TowerApp } from '../http/app.js';
import type { Store } from '../store/open.js';
import { type PreparedQuery, prepare, slot } from '../store/prepared.js';
import type { InsertOne, Tx, Write } from '../store/tx.js';
import type { Db } from '../store/types.js';
import { requireDomain, requireMission } from './access.js';
import { decodeCursor, page } from './cursor.js';
import { collectionSchemas } from './schemas.js';

type Row = Record<string, unknown>;
/** Tables are chosen at run time here; the typed Db is used everywhere else. */
type LooseDb = Kysely<Record<string, Row>>;

export interface ParentIds {
  domain_id?: string;
  mission_id?: string;
}

/** How a field is stored when it is not stored as is (JSON text, bigint). */
export interface FieldCodec {
  encode(value: unknown): unknown;
  decode(stored: unknown): unknown;
}

export interface CollectionSpec {
  /** Singular noun used in events and messages: "mission". */
  entity: string;
  table: string;
  idPrefix: string;
  /** Which parent the path names: none (domains), a domain (missions) or a mission. */
  parent: 'none' | 'domain' | 'mission';
  basePath: string;
  /** Path parameter naming one record, e.g. "mission_id". */
  idParam: string;
  /** The record's, create body's and patch body's schemas; their properties are the columns. */
  schemas: { record: TObject; create: TObject; patch: TObject };
  createScope: Scope;
  /** Values for create-body fields the client left out. */
  defaults: Row;
  codecs?: Record<string, FieldCodec>;
  /** Fields copied into the payload of this collection's feed events. */
  summary: string[];
  /** Tables whose rows reference this record by `column`; delete refuses unless cascade. */
  children?: { table: string; column: string; noun: string }[];
}

/** The wire record: the record schema's fields, in its order, decoded. */
function fromRow(spec: CollectionSpec, row: Row): Row & { id: string } {
  const out: Row = {};
  for (const k of Object.keys(spec.schemas.record.properties)) {
    const codec = spec.codecs?.[k];
    const v = row[k] ?? null;
    out[k] = codec && v !== null ? codec.decode(v) : v;
  }
  return out as Row & { id: string };
}

/** Columns for the fields of `schema` present in `body` (with defaults when given). */
function toColumns(spec: CollectionSpec, schema: TObject, body: Row, defaults: Row | null): Row {
  const out: Row = {};
  for (const k of Object.keys(schema.properties)) {
    const v = body[k] !== undefined ? body[k] : defaults ? (defaults[k] ?? null) : undefined;
    if (v === undefined) continue;
    const codec = spec.codecs?.[k];
    out[k] = codec && v !== null ? codec.encode(v) : v;
  }
  return out;
}

/** What the record routes use: the store to read, and the write path. */
export interface RecordDeps {
  store: Store;
  write: Write;
}

/** A route's path parameters (typed by its params schema: every name a string). */
type Params = Record<string, string>;

/**
 * One collection's reads and writes, for its routes and for MCP tools: `create` and `get` are
 * the work of POST and GET by id, given the caller and the path's ids.
 */
export type RecordCollection = ReturnType<typeof recordCollection>;

export function recordCollection(deps: RecordDeps, spec: CollectionSpec) {
  const idOf = (params: Params) => params[spec.idParam] ?? '';
  const loose = (db: Db | Tx['db']) => db as unknown as LooseDb;

  /** Checks the parent exists and is visible; returns the parent ids for new rows. */
  async function parentOf(principal: Principal, params: Params): Promise<ParentIds> {
    if (spec.parent === 'none') return {};
    const domainId = params.domain_id ?? '';
    if (spec.parent === 'domain') {
      await requireDomain(deps.store.db, principal, domainId);
      return { domain_id: domainId };
    }
    const missionId = params.mission_id ?? '';
    await requireMission(deps.store.db, principal, missionId, domainId);
    return { domain_id: domainId, mission_id: missionId };
  }

  // One record by id (and its parents' ids): the query of GET, compiled once per shape.
  const byId = new Map<string, PreparedQuery<Row>>();
  const byIdQuery = (withDomain: boolean, withMission: boolean) => {
    const key = `${withDomain}/${withMission}`;
    let q = byId.get(key);
    if (!q) {
      q = prepare<Row>(deps.store, () => {
        let b = loose(deps.store.db).selectFrom(spec.table).selectAll().where('id', '=', slot('id'));
        if (withDomain) b = b.where('domain_id', '=', slot('domain_id'));
        if (withMission) b = b.where('mission_id', '=', slot('mission_id'));
        return b;
      });
      byId.set(key, q);
    }
    return q;
  };

  async function load(
    db: Db | Tx['db'],
    principal: Principal,
    params: Params,
    parent: ParentIds,
  ): Promise<Row> {
    const withDomain = parent.domain_id !== undefined && spec.parent !== 'none';
    const withMission = parent.mission_id !== undefined;
    const [row] = await byIdQuery(withDomain, withMission).all(db, {
      id: idOf(params),
      domain_id: parent.domain_id,
      mission_id: parent.mission_id,
    });
    const domainId =
      spec.parent === 'none' ? (row?.id as string | undefined) : (row?.domain_id as string | undefined);
    if (!row || domainId === undefined || !canSeeDomain(principal, domainId)) {
      throw new SvcError('not_found', `${spec.entity} ${idOf(params)} not found`);
    }
    return row;
  }

  function event(tx: Tx, action: 'created' | 'updated' | 'deleted', record: Row & { id: string }): void {
    tx.emit(eventOf(action, record));
  }

  function eventOf(action: 'created' | 'updated' | 'deleted', record: Row & { id: string }): NewEvent {
    const summary: Row = {};
    for (const k of spec.summary) summary[k] = record[k];
    return {
      type: 'matrix',
      domain_id: spec.parent === 'none' ? record.id : (record.domain_id as string),
      mission_id: spec.entity === 'mission' ? record.id : ((record.mission_id as string | undefined) ?? null),
      payload: { entity: spec.entity, action, id: record.id, ...summary },
    };
  }

  /** Which parent row a new record needs (checked by the insert itself), or null. */
  function gateOf(
    principal: Principal,
    params: Params,
  ): { parent: ParentIds; gate?: InsertOne['gate']; missing: string } {
    if (spec.parent === 'none') return { parent: {}, missing: '' };
    const domainId = params.domain_id ?? '';
    if (!canSeeDomain(principal, domainId)) throw new SvcError('not_found', `domain ${domainId} not found`);
    if (spec.parent === 'domain') {
      return {
        parent: { domain_id: domainId },
        gate: { column: 'domain_id', table: 'domains' },
        missing: `domain ${domainId} not found`,
      };
    }
    const missionId = params.mission_id ?? '';
    return {
      parent: { domain_id: domainId, mission_id: missionId },
      gate: { column: 'mission_id', table: 'missions', where: { domain_id: domainId } },
      missing: `mission ${missionId} not found`,
    };
  }

  /** POST: a new record under the path's parents, its `created` event with it. */
  async function create(principal: Principal, params: Params, body: Row): Promise<Row> {
    // One statement on PostgreSQL, one grouped write on SQLite; the insert checks the
    // parent itself (store/tx.ts insertOne), so creating a record is a single store access.
    const { parent, gate, missing } = gateOf(principal, params);
    let record: Row = {};
    const ok = await deps.write.insertOne({
      table: spec.table,
      gate,
      build: (nowMs) => {
        const now = iso(nowMs);
        const row: Row = {
          id: newId(spec.idPrefix, nowMs),
          ...parent,
          ...toColumns(spec, spec.schemas.create, body, spec.defaults),
          created_at: now,
          updated_at: now,
        };
        const rec = fromRow(spec, row);
        record = rec;
        return { row, event: eventOf('created', rec) };
      },
    });
    if (!ok) throw new SvcError('not_found', missing);
    return record;
  }

  /** GET by id: the record, if the caller sees its domain. */
  async function get(principal: Principal, params: Params): Promise<Row> {
    return fromRow(spec, await load(deps.store.db, principal, params, await parentOf(principal, params)));
  }

  return { spec, deps, loose, parentOf, load, event, create, get };
}

export function registerCollection(app: TowerApp, c: RecordCollection): void {
  const { spec, deps, loose, parentOf, load, event } = c;
  const one = `${spec.basePath}/:${spec.idParam}`;
  const schemas = collectionSchemas({
    entity: spec.entity,
    parentParams: [...spec.basePath.matchAll(/:([a-z_]+)/g)].map((m) => m[1] as string),
    idParam: spec.idParam,
    schemas: spec.schemas,
    children: (spec.children ?? []).map((child) => child.noun),
  });

  app.post(spec.basePath, {
    // Domains themselves are tower-wide: only an admin of every domain creates or deletes one.
    config: { scope: spec.createScope, towerWide: spec.parent === 'none' },
    schema: schemas.create,
    handler: async (req, reply) => reply.code(201).send(await c.create(req.principal, req.params, req.body)),
  });

  app.get(spec.basePath, {
    config: { scope: 'feed:read' },
    schema: schemas.list,
    handler: async (req) => {
      const parent = await parentOf(req.principal, req.params);
      const query = req.query;
      const limit = query.limit ?? 50;
      const after = decodeCursor(query.cursor);
      let q = loose(deps.store.db)
        .selectFrom(spec.table)
        .selectAll()
        .orderBy('id')
        .limit(limit + 1);
      if (after !== null) q = q.where('id', '>', after);
      if (parent.mission_id !== undefined) q = q.where('mission_id', '=', parent.mission_id);
      else if (parent.domain_id !== undefined) q = q.where('domain_id', '=', parent.domain_id);
      else if (req.principal.domains !== null) {
        if (req.principal.domains.length === 0) return { items: [], next_cursor: null };
        q = q.where('id', 'in', req.principal.domains);
      }
      return page(
        (await q.execute()).map((r) => fromRow(spec, r)),
        limit,
      );
    },
  });

  app.get(one, {
    config: { scope: 'feed:read' },
    schema: schemas.get,
    handler: async (req) => c.get(req.principal, req.params),
  });

  app.patch(one, {
    config: { scope: 'work:write' },
    schema: schemas.patch,
    handler: async (req) => {
      const parent = await parentOf(req.principal, req.params);
      return deps.write(async (tx) => {
        const before = await load(tx.db, req.principal, req.params, parent);
        const changes = { ...toColumns(spec, spec.schemas.patch, req.body, null), updated_at: tx.now };
        await loose(tx.db)
          .updateTable(spec.table)
          .set(changes)
          .where('id', '=', before.id as string)
          .execute();
        const rec = fromRow(spec, { ...before, ...changes });
        event(tx, 'updated', rec);
        return rec;
      });
    },
  });

  app.delete(one, {
    config: { scope: spec.parent === 'none' ? 'admin' : 'work:write', towerWide: spec.parent === 'none' },
    schema: schemas.delete,
    handler: async (req, reply) => {
      const parent = await parentOf(req.principal, req.params);
      const cascade = req.query.cascade === true;
      await deps.write(async (tx) => {
        const row = await load(tx.db, req.principal, req.params, parent);
        if (!cascade) {
          for (const child of spec.children ?? []) {
            const found = await loose(tx.db)
              .selectFrom(child.table)
              .select('id')
              .where(child.column, '=', row.id as string)
              .limit(1)
              .executeTakeFirst();
            if (found) {
              throw new SvcError(
                'conflict',
                `${spec.entity} ${row.id as string} still has ${child.noun}: delete them first, or pass ?cascade=true`,
              );
            }
          }
        }
        for (const child of spec.children ?? []) {
          await loose(tx.db)
            .deleteFrom(child.table)
            .where(child.column, '=', row.id as string)
            .execute();
        }
        await loose(tx.db)
          .deleteFrom(spec.table)
          .where('id', '=', row.id as string)
          .execute();
        event(tx, 'deleted', fromRow(spec, row));
      });
      return reply.code(204).send();
    },
  });
}
