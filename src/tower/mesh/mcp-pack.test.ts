// The tower with an invalid SVC_SCHEMA_PACK_FILE starts, and enforces the embedded defaults.
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { makeTempDir } from '../../../test/support/tmp.js';
import { startTestTower } from '../../../test/support/tower.js';

describe('tower with an invalid schema pack', () => {
  const tmp = makeTempDir('svc-pack-');
  const saved = process.env.SVC_SCHEMA_PACK_FILE;
  afterAll(() => {
    if (saved === undefined) delete process.env.SVC_SCHEMA_PACK_FILE;
    else process.env.SVC_SCHEMA_PACK_FILE = saved;
    tmp.remove();
  });

  it('starts and checks tool arguments against the embedded defaults', async () => {
    const file = join(tmp.dir, 'pack.json');
    writeFileSync(file, '{"tools": {"claim_mesh_task": {"type": "strnig"}}}');
    process.env.SVC_SCHEMA_PACK_FILE = file;
    const t = await startTestTower('sqlite');
    try {
      const r = await t.call('POST', '/mcp/call', { tool: 'claim_mesh_task', args: { agent_id: 5 } });
      expect(r.status).toBe(400);
      expect(JSON.stringify(r.body)).toContain('args/agent_id');
    } finally {
      await t.close();
    }
  });
});
