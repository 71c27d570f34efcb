// Ajv setup for Fastify route schemas. Bodies are strict (no coercion, unknown fields are
// errors, not silently dropped); query strings and params coerce "5" to 5 and repeatable
// parameters to arrays, as every HTTP client sends them as text.
import AjvModule from 'ajv';
import addFormatsModule from 'ajv-formats';
import type { FastifySchemaCompiler } from 'fastify';

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
  return ajv;
}

export function createValidatorCompiler(): FastifySchemaCompiler<unknown> {
  const strict = makeAjv(false);
  const lenient = makeAjv('array');
  return ({ schema, httpPart }) => {
    const ajv = httpPart === 'body' ? strict : lenient;
    return ajv.compile(schema as object) as ReturnType<FastifySchemaCompiler<unknown>>;
  };
}

// Shared with svcd's schema pack (protocol/field-errors.ts).
export { fieldErrors } from '../../protocol/field-errors.js';
