// Ajv setup for Fastify route schemas. Bodies are strict (no coercion, unknown fields are
// errors, not silently dropped); query strings and params coerce "5" to 5 and repeatable
// parameters to arrays, as every HTTP client sends them as text.
//
// Text the stores keep must be text both can hold: PostgreSQL refuses the NUL character in
// text that SQLite stores, so every string a schema declares refuses it (`noNul`), and every
// path parameter and query value does too, schema or not (installTextRule). Free-form JSON
// (metadata, payloads) is stored as JSON text, where NUL is escaped, and may hold it.
import AjvModule from 'ajv';
import addFormatsModule from 'ajv-formats';
import type { FastifyInstance, FastifySchemaCompiler } from 'fastify';
import { SvcError } from '../../protocol/errors.js';
import { fieldErrors } from '../../protocol/field-errors.js';

// ajv and ajv-formats are CommonJS with default exports.
const Ajv = AjvModule.default ?? AjvModule;
const addFormats = addFormatsModule.default ?? addFormatsModule;

type AjvInstance = InstanceType<typeof Ajv>;

export function makeAjv(coerce: boolean | 'array'): AjvInstance {
  const ajv = new Ajv({
    coerceTypes: coerce,
    useDefaults: true,
    removeAdditional: false,
    allErrors: false,
    strict: false,
  });
  addFormats(ajv);
  ajv.addKeyword({
    keyword: 'noNul',
    type: 'string',
    schemaType: 'boolean',
    errors: true,
    validate: function noNul(on: boolean, data: string) {
      if (!on || !data.includes('\u0000')) return true;
      (noNul as { errors?: unknown[] }).errors = [{ keyword: 'noNul', message: NUL_MESSAGE, params: {} }];
      return false;
    },
  });
  return ajv;
}

const NUL_MESSAGE = 'must not contain the NUL character (U+0000)';

/** Keys whose value is a schema, and keys whose value is a list or map of schemas. */
const SUBSCHEMA = ['items', 'additionalProperties', 'not', 'if', 'then', 'else', 'contains', 'propertyNames'];
const SUBSCHEMA_LISTS = ['anyOf', 'oneOf', 'allOf', 'prefixItems'];
const SUBSCHEMA_MAPS = ['properties', 'patternProperties', '$defs', 'definitions'];

/** A copy of `schema` in which every string refuses NUL. */
export function withTextRule(schema: unknown): unknown {
  if (typeof schema !== 'object' || schema === null || Array.isArray(schema)) return schema;
  const src = schema as Record<string, unknown>;
  const out: Record<string, unknown> = { ...src };
  const type = src.type;
  if (type === 'string' || (Array.isArray(type) && type.includes('string'))) out.noNul = true;
  for (const k of SUBSCHEMA) if (k in src) out[k] = withTextRule(src[k]);
  for (const k of SUBSCHEMA_LISTS) {
    if (Array.isArray(src[k])) out[k] = (src[k] as unknown[]).map(withTextRule);
  }
  for (const k of SUBSCHEMA_MAPS) {
    const m = src[k];
    if (typeof m === 'object' && m !== null) {
      out[k] = Object.fromEntries(Object.entries(m).map(([name, sub]) => [name, withTextRule(sub)]));
    }
  }
  return out;
}

export function createValidatorCompiler(): FastifySchemaCompiler<unknown> {
  const strict = makeAjv(false);
  const lenient = makeAjv('array');
  return ({ schema, httpPart }) => {
    const ajv = httpPart === 'body' ? strict : lenient;
    return ajv.compile(withTextRule(schema) as object) as ReturnType<FastifySchemaCompiler<unknown>>;
  };
}

/**
 * Checks a request body outside a route (MCP tools that call a route's service) exactly as
 * the route's body schema would: same compiler, same validation_failed problem.
 */
export function bodyCheck(schema: object): (body: unknown) => void {
  const validate = makeAjv(false).compile(withTextRule(schema) as object);
  return (body) => {
    if (validate(body)) return;
    const errors = fieldErrors('body', validate.errors ?? []);
    const first = errors[0];
    throw new SvcError('validation_failed', first ? `${first.field}: ${first.message}` : 'invalid request', {
      errors,
    });
  };
}

/**
 * The name of the first value of `value` (a map of strings, string arrays, anything else) that
 * is a string holding NUL or a list of strings one of which does.
 */
export function nulField(value: unknown): string | null {
  if (typeof value !== 'object' || value === null) return null;
  for (const [k, v] of Object.entries(value)) {
    const strings = Array.isArray(v) ? v : [v];
    if (strings.some((x) => typeof x === 'string' && x.includes('\u0000'))) return k;
  }
  return null;
}

/**
 * Refuses NUL in every path parameter and query value before any route reads them (many
 * routes name records by path without a params schema).
 */
export function installTextRule(app: FastifyInstance): void {
  // A callback hook: cheaper than an async one on every request.
  app.addHook('preValidation', (req, _reply, done) => {
    try {
      refuseNul('params', req.params);
      refuseNul('query', req.query);
    } catch (e) {
      done(e as Error);
      return;
    }
    done();
  });
}

/** Throws validation_failed naming `part/<field>` when a value of `value` holds NUL (nulField). */
export function refuseNul(part: string, value: unknown): void {
  const name = nulField(value);
  if (name === null) return;
  const field = `${part}/${name}`;
  throw new SvcError('validation_failed', `${field}: ${NUL_MESSAGE}`, {
    errors: [{ field, message: NUL_MESSAGE }],
  });
}

// Shared with svcd's schema pack (protocol/field-errors.ts).
export { fieldErrors };
