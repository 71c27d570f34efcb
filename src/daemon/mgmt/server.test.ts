// mgmt.sock params validation: Ajv compiled at a method's first call, and the hand-written check
// of `Empty` (no params) answering exactly as Ajv does.
import { Type } from '@sinclair/typebox';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { silentLogger } from '../../lib/log.js';
import { Empty } from '../../protocol/common.js';
import { isSvcError } from '../../protocol/errors.js';
import { RUNTIME_KINDS, RuntimeKindSchema } from '../../protocol/runtimes.js';
import { MgmtServer } from './server.js';

async function outcome(server: MgmtServer, method: string, params: unknown): Promise<unknown> {
  try {
    return { result: await server.invoke(method, params, new AbortController().signal) };
  } catch (e) {
    if (!isSvcError(e)) throw e;
    return { code: e.code, message: e.message };
  }
}

describe('MgmtServer params validation', () => {
  const server = new MgmtServer(silentLogger());
  server.register('empty', async () => 'ok', Empty);
  // The same schema, not the same object: validated by Ajv.
  server.register('ajv_empty', async () => 'ok', Type.Object({}, { additionalProperties: false }));
  server.register(
    'typed',
    async (p) => p,
    Type.Object({ id: Type.String(), n: Type.Integer({ default: 3 }) }),
  );

  it('answers Empty params exactly as Ajv does, for any JSON value', async () => {
    await fc.assert(
      fc.asyncProperty(fc.jsonValue(), async (params) => {
        expect(await outcome(server, 'empty', params)).toEqual(await outcome(server, 'ajv_empty', params));
      }),
      { numRuns: 300 },
    );
  });

  it('names the unknown field of an Empty method', async () => {
    expect(await outcome(server, 'empty', { a: 1, b: 2 })).toEqual({
      code: 'validation_failed',
      message: 'params: unknown field a',
    });
    expect(await outcome(server, 'empty', undefined)).toEqual({ result: 'ok' });
  });

  it('validates a schema at the first call and applies its defaults', async () => {
    expect(await outcome(server, 'typed', { id: 'x' })).toEqual({ result: { id: 'x', n: 3 } });
    expect(await outcome(server, 'typed', { id: 1 })).toEqual({
      code: 'validation_failed',
      message: 'params/id: must be string',
    });
  });
});

describe('MgmtServer params errors', () => {
  it('names the valid runtime kinds for an unknown one', async () => {
    const server = new MgmtServer(silentLogger());
    server.register('enroll', async (p) => p, Type.Object({ runtime: RuntimeKindSchema }));
    expect(await outcome(server, 'enroll', { runtime: 'delta_cli' })).toEqual({
      code: 'validation_failed',
      message: `params/runtime: must be one of ${JSON.stringify(RUNTIME_KINDS)}`,
    });
  });
});
