// Field errors from Ajv: a union of constants (how runtime kinds, claim policies and states are
// spelled) names every valid value instead of Ajv's "must be equal to constant".
import AjvModule from 'ajv';
import { describe, expect, it } from 'vitest';
import { fieldErrors } from './field-errors.js';
import { RUNTIME_KINDS, RuntimeKindSchema } from './runtimes.js';
import { Type } from './type.js';

const Ajv = AjvModule.default ?? AjvModule;

function errorsOf(schema: unknown, value: unknown, allErrors: boolean) {
  const validate = new Ajv({ strict: false, allErrors }).compile(schema as object);
  expect(validate(value)).toBe(false);
  return validate.errors ?? [];
}

describe('fieldErrors', () => {
  const schema = Type.Object({ runtime: RuntimeKindSchema, name: Type.String() });

  it('names every valid runtime kind for an unknown one', () => {
    for (const allErrors of [false, true]) {
      expect(fieldErrors('params', errorsOf(schema, { runtime: 'delta_cli', name: 'x' }, allErrors))).toEqual(
        [{ field: 'params/runtime', message: `must be one of ${JSON.stringify(RUNTIME_KINDS)}` }],
      );
    }
  });

  it('names the valid values when the value has the wrong type too', () => {
    expect(fieldErrors('body', errorsOf(schema, { runtime: 7, name: 'x' }, true))).toEqual([
      { field: 'body/runtime', message: `must be one of ${JSON.stringify(RUNTIME_KINDS)}` },
    ]);
  });

  it('keeps the errors around the union as they are', () => {
    expect(fieldErrors('body', errorsOf(schema, { runtime: 'nope', name: 1, extra: true }, true))).toEqual([
      { field: 'body/runtime', message: `must be one of ${JSON.stringify(RUNTIME_KINDS)}` },
      { field: 'body/name', message: 'must be string' },
    ]);
  });

  it('leaves a union of objects alone', () => {
    const objects = Type.Object({
      v: Type.Union([Type.Object({ a: Type.String() }), Type.Object({ b: Type.String() })]),
    });
    const errors = fieldErrors('body', errorsOf(objects, { v: {} }, false));
    expect(errors.at(-1)).toEqual({ field: 'body/v', message: 'must match a schema in anyOf' });
    expect(errors.some((e) => e.message.startsWith('must be one of'))).toBe(false);
  });
});
