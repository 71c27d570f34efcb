import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { makeTempDir } from '../../test/support/tmp.js';
import type { SvcError } from './errors.js';
import { MCP_TOOLS } from './mcp-tools.js';
import { compileSchemaPack, embeddedSchemaPack, loadSchemaPack, parseSchemaPack } from './schema-pack.js';

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

describe('loadSchemaPack', () => {
  const tmp = makeTempDir('svc-pack-');
  afterAll(() => tmp.remove());
  const logged: string[] = [];
  const log = { info: () => {}, error: (o: object) => logged.push(JSON.stringify(o)) };

  it('falls back to the embedded defaults when the file is invalid or missing, saying why', async () => {
    const bad = join(tmp.dir, 'bad.json');
    writeFileSync(bad, JSON.stringify({ tools: { send_inbox: { type: 'strnig' } } }));
    const invalid = await loadSchemaPack(bad, log);
    expect(invalid.error).toMatch(/schema pack .*bad\.json: tools\.send_inbox/);
    expect(invalid.pack.pack.overridden).toEqual([]);
    const missing = await loadSchemaPack(join(tmp.dir, 'nope.json'), log);
    expect(missing.error).toMatch(/nope\.json/);
    expect(logged).toHaveLength(2);
    // The defaults are enforced.
    expect(() => invalid.pack.check('send_inbox', { agent_id: 5 })).toThrow();
  });

  it('without a file enforces the embedded pack, compiled at its first check', async () => {
    const loaded = await loadSchemaPack(undefined, log);
    expect(loaded.error).toBeNull();
    expect(loaded.pack.source).toBe('embedded');
    expect(errorOf(() => loaded.pack.check('claim_mesh_task', { agent_id: 5 })).errors?.[0]?.field).toBe(
      'args/agent_id',
    );
    expect(errorOf(() => loaded.pack.check('nope', {})).code).toBe('not_found');
  });

  it('uses a valid file', async () => {
    const good = join(tmp.dir, 'good.json');
    writeFileSync(good, JSON.stringify({ tools: { send_inbox: { type: 'object' } } }));
    const loaded = await loadSchemaPack(good, log);
    expect(loaded.error).toBeNull();
    expect(loaded.pack.pack.overridden).toEqual(['send_inbox']);
  });
});
