// Ajv setup for Fastify route schemas. Bodies are strict (no coercion, unknown fields are
// errors, not silently dropped); query strings and params coerce "5" to 5 and repeatable
// parameters to arrays, as every HTTP client sends them as text.
import AjvModule from 'ajv';
import addFormatsModule from 'ajv-formats';
import type { FastifySchemaCompiler } from 'fastify';
import type { FieldError } from '../../protocol/errors.js';

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

interface AjvErrorLike {
  instancePath?: string;
  keyword?: string;
  params?: Record<string, unknown>;
  message?: string;
}

/** Ajv errors → field errors that name the field ("body/title: must be string"). */
export function fieldErrors(context: string, errors: readonly AjvErrorLike[]): FieldError[] {
  return errors.map((e) => {
    let path = (e.instancePath ?? '').replace(/^\//, '');
    let message = e.message ?? 'is invalid';
    if (e.keyword === 'additionalProperties' && typeof e.params?.additionalProperty === 'string') {
      path = join(path, e.params.additionalProperty);
      message = 'unknown field';
    } else if (e.keyword === 'required' && typeof e.params?.missingProperty === 'string') {
      path = join(path, e.params.missingProperty);
      message = 'is required';
    } else if (e.keyword === 'enum' || e.keyword === 'anyOf') {
      message = e.keyword === 'enum' ? `must be one of ${JSON.stringify(e.params?.allowedValues)}` : message;
    }
    return { field: path ? `${context}/${path}` : context, message };
  });
}

function join(a: string, b: string): string {
  return a ? `${a}/${b}` : b;
}
