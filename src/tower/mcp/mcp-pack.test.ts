// The tower enforces its schema pack file (SVC_SCHEMA_PACK_FILE at the CLI) on /mcp/call payloads, naming the field it refuses;
// with an invalid pack it starts and enforces the embedded defaults.
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { makeTempDir } from '../../../test/support/tmp.js';
import { STORES, startTestTower } from '../../../test/support/tower.js';

describe('tower with an invalid schema pack', () => {
  const tmp = makeTempDir('svc-pack-');
  afterAll(() => {
    tmp.remove();
  });

  it('starts and checks tool arguments against the embedded defaults', async () => {
    const file = join(tmp.dir, 'pack.json');
    writeFileSync(file, '{"tools": {"claim_mesh_task": {"type": "strnig"}}}');
    const t = await startTestTower('sqlite', { schemaPackFile: file });
    try {
      const r = await t.call('POST', '/mcp/call', { tool: 'claim_mesh_task', args: { agent_id: 5 } });
      expect(r.status).toBe(400);
      expect(JSON.stringify(r.body)).toContain('args/agent_id');
    } finally {
      await t.close();
    }
  });
});

describe.each(STORES)('tower with a schema pack on %s', (store) => {
  const tmp = makeTempDir('svc-pack-');
  afterAll(() => {
    tmp.remove();
  });

  it('refuses domain and task payloads the pack forbids, naming the field, and writes nothing', async () => {
    const file = join(tmp.dir, 'pack.json');
    writeFileSync(
      file,
      JSON.stringify({
        tools: {
          create_domain: {
            type: 'object',
            required: ['name'],
            properties: { name: { type: 'string', pattern: '^[a-z]+$' }, description: { type: 'string' } },
            additionalProperties: false,
          },
          submit_mesh_task: {
            type: 'object',
            required: ['mission_id', 'title'],
            properties: {
              mission_id: { type: 'string' },
              title: { type: 'string', maxLength: 8 },
              priority: { type: 'integer', maximum: 10 },
            },
            additionalProperties: false,
          },
        },
      }),
    );
    const t = await startTestTower(store, { schemaPackFile: file });
    try {
      const mcp = (tool: string, args: Record<string, unknown>) =>
        t.call('POST', '/mcp/call', { tool, args });
      const fieldsOf = (body: Record<string, unknown>) =>
        ((body.errors ?? []) as { field: string }[]).map((e) => e.field);

      const badDomain = await mcp('create_domain', { name: 'Not Lower' });
      expect([badDomain.status, badDomain.body.code]).toEqual([400, 'validation_failed']);
      expect(fieldsOf(badDomain.body)).toEqual(['args/name']);
      const domain = (await mcp('create_domain', { name: 'ok' })).body.result as { id: string };
      const mission = (await t.call('POST', `/domains/${domain.id}/m`, { name: 'm' })).body as { id: string };

      const long = await mcp('submit_mesh_task', { mission_id: mission.id, title: 'far too long' });
      expect([long.status, long.body.code]).toEqual([400, 'validation_failed']);
      expect(fieldsOf(long.body)).toEqual(['args/title']);
      const extra = await mcp('submit_mesh_task', {
        mission_id: mission.id,
        title: 'ok',
        claim_policy: 'broadcast',
      });
      expect(fieldsOf(extra.body)).toEqual(['args/claim_policy']);
      const urgent = await mcp('submit_mesh_task', { mission_id: mission.id, title: 'ok', priority: 11 });
      expect(fieldsOf(urgent.body)).toEqual(['args/priority']);

      const domains = (await t.call('GET', '/domains')).body.items as { name: string }[];
      expect(domains.map((d) => d.name)).toEqual(['ok']);
      expect((await t.call('GET', `/work/missions/${mission.id}/tasks`)).body.items).toEqual([]);
      expect((await mcp('submit_mesh_task', { mission_id: mission.id, title: 'fits' })).status).toBe(200);
    } finally {
      await t.close();
    }
  });
});
