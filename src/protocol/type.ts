// The schema builder the protocol modules use: the subset of TypeBox's `Type` they call, built as
// the same plain JSON Schema objects (same keys, same key order, same TypeBox Kind/Optional
// symbols, so TypeBox's compiler and guards accept them). Why not TypeBox itself at run time:
// importing `@sinclair/typebox` loads ~200 ES modules and costs svcd ≈4 MiB of private memory
// (bench/daemon), only to build constant objects. The types stay TypeBox's (`Static`, `TSchema`),
// and type.test.ts checks every exported protocol schema against TypeBox's own builder.
import type * as TypeBox from '@sinclair/typebox';

export type { Static, TSchema } from '@sinclair/typebox';

const Kind = Symbol.for('TypeBox.Kind');
const OptionalKind = Symbol.for('TypeBox.Optional');

type Schema = Record<string | symbol, unknown>;
type Options = Record<string, unknown> | undefined;

const make = (kind: string, schema: Record<string, unknown>, options: Options): Schema => ({
  ...options,
  [Kind]: kind,
  ...schema,
});

const isOptional = (s: Schema) => s[OptionalKind] === 'Optional';

function object(properties: Record<string, Schema>, options?: Options): Schema {
  const required = Object.keys(properties).filter((k) => !isOptional(properties[k] as Schema));
  return make(
    'Object',
    { type: 'object', ...(required.length > 0 ? { required } : {}), properties },
    options,
  );
}

const lite = {
  String: (options?: Options) => make('String', { type: 'string' }, options),
  Integer: (options?: Options) => make('Integer', { type: 'integer' }, options),
  Number: (options?: Options) => make('Number', { type: 'number' }, options),
  Boolean: (options?: Options) => make('Boolean', { type: 'boolean' }, options),
  Null: (options?: Options) => make('Null', { type: 'null' }, options),
  Unknown: (options?: Options) => make('Unknown', {}, options),
  Literal: (value: string | number | boolean, options?: Options) =>
    make('Literal', { const: value, type: typeof value }, options),
  Array: (items: Schema, options?: Options) => make('Array', { type: 'array', items }, options),
  Union: (anyOf: Schema[], options?: Options) => make('Union', { anyOf }, options),
  Optional: (schema: Schema) => ({ ...schema, [OptionalKind]: 'Optional' }),
  Object: object,
  // Record keyed by Type.String(): the only key type the protocol uses.
  Record: (_key: Schema, value: Schema, options?: Options) =>
    make('Record', { type: 'object', patternProperties: { '^(.*)$': value } }, options),
  // Composite of objects with disjoint keys: the only form the protocol uses.
  Composite: (objects: Schema[], options?: Options) => {
    const properties: Record<string, Schema> = {};
    for (const o of objects) Object.assign(properties, o.properties as Record<string, Schema>);
    return object(properties, options);
  },
};

/** TypeBox's `Type`, as far as the protocol uses it (see the file comment). */
export const Type = lite as unknown as Pick<
  typeof TypeBox.Type,
  | 'String'
  | 'Integer'
  | 'Number'
  | 'Boolean'
  | 'Null'
  | 'Unknown'
  | 'Literal'
  | 'Array'
  | 'Union'
  | 'Optional'
  | 'Object'
  | 'Record'
  | 'Composite'
>;
