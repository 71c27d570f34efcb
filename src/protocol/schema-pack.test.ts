import { describe, expect, it } from 'vitest';
import type { SvcError } from './errors.js';
import { MCP_TOOLS } from './mcp-tools.js';
import { compileSchemaPack, embeddedSchemaPack, parseSchemaPack } from './schema-pack.js';

const errorOf = (f: () => void): SvcError => {
  try {
    f();
  } catch (e) {
    return e as SvcError;
  }
  throw new Error('did not throw');
};

describe('schema pack', () => {
  it('embeds a schema for every tool', () => {
    expect(Object.keys(embeddedSchemaPack().tools).sort()).toEqual(Object.keys(MCP_TOOLS).sort());
  });

  it('replaces only the tools a pack file names', () => {
    const pack = parseSchemaPack(
      JSON.stringify({
        tools: { send_inbox: { type: 'object', required: ['agent_id', 'text', 'urgency'] } },
      }),
      'pack.json',
    );
    expect(pack.overridden).toEqual(['send_inbox']);
    const c = compileSchemaPack(pack);
    const e = errorOf(() => c.check('send_inbox', { agent_id: 'ag_1', text: 'hi' }));
    expect(e.code).toBe('validation_failed');
    expect(e.errors).toEqual([{ field: 'args/urgency', message: 'is required' }]);
    expect(() => c.check('get_mesh_task', { task_id: 'mt_1' })).not.toThrow();
  });

  it.each([
    ['not json', '{', /not JSON/],
    ['an array', '[]', /expected an object/],
    ['no tools', '{}', /"tools" must be an object/],
    ['an unknown top-level field', '{"tools":{},"tool":{}}', /unknown top-level field "tool"/],
    ['an unknown tool', '{"tools":{"drop_tables":{}}}', /unknown tool "drop_tables"/],
    ['a schema that is a string', '{"tools":{"send_inbox":"x"}}', /tools.send_inbox must be a JSON Schema/],
  ])('refuses %s, saying why', (_name, text, why) => {
    expect(() => parseSchemaPack(text, 'pack.json')).toThrow(why);
  });

  it('refuses a schema Ajv cannot compile, naming the tool', () => {
    const pack = parseSchemaPack('{"tools":{"send_inbox":{"type":"strnig"}}}', 'pack.json');
    expect(() => compileSchemaPack(pack)).toThrow(/pack.json: tools.send_inbox: schema is invalid/);
  });

  it('names every bad argument and refuses unknown tools', () => {
    const c = compileSchemaPack(embeddedSchemaPack());
    const bad = errorOf(() => c.check('claim_mesh_task', { agent_id: 5 }));
    expect(bad.code).toBe('validation_failed');
    expect(bad.errors?.[0]?.field).toBe('args/agent_id');
    expect(
      errorOf(() => c.check('create_document', { domain_id: 'd', mission_id: 'm', title: 't', x: 1 })).errors,
    ).toEqual([{ field: 'args/content', message: 'is required' }]);
    expect(errorOf(() => c.check('nope', {})).code).toBe('not_found');
  });
});
