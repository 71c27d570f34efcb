// Response serializers (fast-json-stringify), compiled once per distinct schema for the whole
// app. Every route answers its errors with the same problem+json schema: compiled per route and
// status (Fastify's default), that alone tripled the tower's start time. Schemas are told apart
// by their JSON text; the shared schemas they refer to ($ref) are the app's, the same in every
// context.
import { SerializerSelector } from '@fastify/fast-json-stringify-compiler';
import type { FastifyServerOptions } from 'fastify';

type CompilersFactory = NonNullable<
  NonNullable<FastifyServerOptions['schemaController']>['compilersFactory']
>;
type BuildSerializer = NonNullable<CompilersFactory['buildSerializer']>;
type Serialize = (data: unknown) => string;

/** A serializer factory for one app (pass as schemaController.compilersFactory.buildSerializer). */
export function sharedSerializers(): BuildSerializer {
  const build = SerializerSelector();
  const cache = new Map<string, Serialize>();
  return (externalSchemas, serializerOpts) => {
    const compile = build(externalSchemas, serializerOpts);
    return (route) => {
      const key = JSON.stringify(route.schema);
      let s = cache.get(key);
      if (!s) {
        s = compile(route) as Serialize;
        cache.set(key, s);
      }
      return s;
    };
  };
}
