// The route schemas of one record collection (records/collection.ts): create, list, read,
// patch and delete, from the record's protocol schemas. Path parameters are any text, as
// they always were here: an id that cannot exist is a 404, not a validation error.
import { type TObject, type TString, Type } from '@sinclair/typebox';
import { ListOf, ListQuery } from '../../protocol/common.js';
import { described, noContent, route } from '../http/route-schema.js';

export interface CollectionDoc {
  entity: string;
  /** Path parameter names: the parents' (from the base path), then the record's. */
  parentParams: string[];
  idParam: string;
  schemas: { record: TObject; create: TObject; patch: TObject };
  /** What a delete refuses without ?cascade=true, e.g. "missions". */
  children: string[];
}

const params = (names: string[]) =>
  Type.Object(Object.fromEntries(names.map((n) => [n, Type.String()])) as Record<string, TString>, {
    additionalProperties: false,
  });

export const CascadeQuery = Type.Object(
  { cascade: Type.Optional(Type.Boolean({ description: 'delete what hangs off the record too' })) },
  { additionalProperties: false },
);

export function collectionSchemas(d: CollectionDoc) {
  const tags = [`${d.entity}s`];
  const parents = params(d.parentParams);
  const one = params([...d.parentParams, d.idParam]);
  const { record } = d.schemas;
  return {
    create: route({
      summary: `Create a ${d.entity}`,
      tags,
      params: parents,
      body: d.schemas.create,
      response: { 201: described(record, `the new ${d.entity}`) },
      errors: ['not_found'],
      writes: true,
    }),
    list: route({
      summary: `List ${d.entity}s`,
      tags,
      params: parents,
      querystring: ListQuery,
      response: { 200: ListOf(record) },
      errors: ['not_found'],
    }),
    get: route({
      summary: `Read a ${d.entity}`,
      tags,
      params: one,
      response: { 200: record },
      errors: ['not_found'],
    }),
    patch: route({
      summary: `Change a ${d.entity}`,
      tags,
      params: one,
      body: d.schemas.patch,
      response: { 200: described(record, `the changed ${d.entity}`) },
      errors: ['not_found'],
      writes: true,
    }),
    delete: route({
      summary: `Delete a ${d.entity}`,
      ...(d.children.length > 0
        ? { description: `Refused (409) while it has ${d.children.join(', ')}, unless ?cascade=true.` }
        : {}),
      tags,
      params: one,
      querystring: CascadeQuery,
      response: { 204: noContent('deleted') },
      errors: ['not_found', 'conflict'],
      writes: true,
    }),
  };
}
