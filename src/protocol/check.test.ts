// protocol/check.ts must judge every message exactly as Ajv judges it, for each schema it is
// used with: arbitrary JSON values, and valid messages with one field replaced by anything.
import AjvModule from 'ajv';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { ErrorFrameSchema, ExitFrameSchema, ResizeFrameSchema } from './attach.js';
import { compileCheck } from './check.js';
import { ControlEnvelope, NODE_TO_TOWER, TOWER_TO_NODE } from './control.js';
import { JsonRpcBatch, JsonRpcRequest } from './mgmt.js';
import { type TSchema, Type } from './type.js';

const valid: Record<string, unknown> = {
  welcome: { type: 'welcome', node_id: 'node_1', heartbeat_ms: 10_000 },
  task_ready: { type: 'task_ready', task_id: 'mt_1', mission_id: 'm_1', domain_id: 'd_1' },
  task_cancelled: { type: 'task_cancelled', task_id: 'mt_1' },
  approval_decided: { type: 'approval_decided', approval_id: 'apr_1', status: 'rejected', reason: null },
  'attach.open': {
    type: 'attach.open',
    stream_id: 'st_abcdefgh',
    agent_id: 'a1',
    cols: 80,
    rows: 24,
    read_only: false,
    ts: 1,
    sig: 'ab',
    who: 'x',
  },
  'node.request': { type: 'node.request', request_id: 'rq_1', method: 'node.status', params: {} },
  hello: {
    type: 'hello',
    version: '1',
    attach_secret: 'x'.repeat(32),
    agents: [{ agent_id: 'a', status: 'idle' }],
  },
  agent_status: { type: 'agent_status', agent_id: 'a', status: 'busy' },
  'node.response': { type: 'node.response', request_id: 'rq_1', result: { a: 1 } },
  envelope: { type: 'x' },
  request: { jsonrpc: '2.0', id: 1, method: 'daemon.status', params: {} },
  batch: [{ jsonrpc: '2.0', id: 1, method: 'daemon.status' }],
  extra: { a: ['x', 'y'], b: 'abc', r: { k: 1 } },
  resize: { type: 'resize', cols: 80, rows: 24 },
  exit: { type: 'exit', code: 0, signal: null },
  error: { type: 'error', code: 'unavailable', message: 'x' },
};

const schemas: Record<string, TSchema> = {
  ...TOWER_TO_NODE,
  ...NODE_TO_TOWER,
  envelope: ControlEnvelope,
  request: JsonRpcRequest,
  batch: JsonRpcBatch,
  resize: ResizeFrameSchema,
  exit: ExitFrameSchema,
  error: ErrorFrameSchema,
  // Keywords the protocol uses elsewhere: uniqueItems, patternProperties, minLength in code points.
  extra: Type.Object(
    {
      a: Type.Array(Type.String({ minLength: 1, maxLength: 2 }), { uniqueItems: true, maxItems: 3 }),
      b: Type.String({ pattern: '^[a-c]+$', maxLength: 3 }),
      r: Type.Record(Type.String(), Type.Integer({ minimum: 0, maximum: 9 })),
    },
    { additionalProperties: false },
  ),
};

const Ajv = AjvModule.default ?? AjvModule;
const ajv = new Ajv({ strict: false, allErrors: false });

/** A valid message with one field (at any depth) replaced by an arbitrary value. */
function mutate(v: unknown, path: number[], replacement: unknown): unknown {
  if (path.length === 0 || typeof v !== 'object' || v === null) return replacement;
  const [i, ...rest] = path as [number, ...number[]];
  if (Array.isArray(v)) {
    if (v.length === 0) return replacement;
    const copy = [...v];
    const k = i % copy.length;
    copy[k] = mutate(copy[k], rest, replacement);
    return copy;
  }
  const keys = Object.keys(v);
  if (keys.length === 0) return replacement;
  const key = keys[i % keys.length] as string;
  return { ...v, [key]: mutate((v as Record<string, unknown>)[key], rest, replacement) };
}

describe('protocol/check', () => {
  for (const [name, schema] of Object.entries(schemas)) {
    it(`judges ${name} messages as Ajv does`, () => {
      const check = compileCheck(schema);
      const validate = ajv.compile(schema);
      expect(check(valid[name])).toBeNull();
      const values = fc.oneof(
        fc.jsonValue(),
        fc
          .tuple(fc.array(fc.nat(), { maxLength: 3 }), fc.jsonValue({ maxDepth: 2 }))
          .map(([path, r]) => mutate(valid[name], path, r)),
        fc
          .tuple(fc.string(), fc.jsonValue({ maxDepth: 1 }))
          .map(([k, x]) => ({ ...(valid[name] as object), [k]: x })),
      );
      fc.assert(
        fc.property(values, (v) => {
          expect(check(v) === null).toBe(validate(v));
        }),
        { numRuns: 400 },
      );
    });
  }

  it('refuses to compile a schema with a keyword it does not know', () => {
    expect(() => compileCheck(Type.String({ format: 'date-time' }))).toThrow(/unsupported keyword format/);
  });
});
