// The MCP approval and inbox tools run the feed's approval service: the same records, refusals
// and validation messages as POST /approvals and POST /inbox, whatever the schema pack allows.
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { makeTempDir } from '../../../test/support/tmp.js';
import { STORES, startTestTower } from '../../../test/support/tower.js';

describe.each(STORES)('MCP approval and inbox tools on %s', (store) => {
  const tmp = makeTempDir('svc-mcp-apr-');
  afterAll(() => {
    tmp.remove();
  });

  it('answer as the REST routes do, and refuse what they refuse with the same problem', async () => {
    // A pack looser than the routes: the routes' own body rules still hold.
    const file = join(tmp.dir, 'pack.json');
    writeFileSync(
      file,
      JSON.stringify({ tools: { request_approval: { type: 'object' }, send_inbox: { type: 'object' } } }),
    );
    const t = await startTestTower(store, { schemaPackFile: file });
    try {
      const mcp = (tool: string, args: Record<string, unknown>) =>
        t.call('POST', '/mcp/call', { tool, args });
      const problem = (r: { status: number; body: Record<string, unknown> }) => [
        r.status,
        r.body.code,
        r.body.detail,
      ];
      const domain = (await t.call('POST', '/domains', { name: 'd' })).body as { id: string };

      const asked = await mcp('request_approval', { domain_id: domain.id, title: 'ship it?' });
      expect(asked.status).toBe(200);
      const approval = asked.body.result as { id: string };
      expect(approval).toMatchObject({ domain_id: domain.id, title: 'ship it?', status: 'pending', detail: '' });
      expect((await t.call('GET', `/approvals/${approval.id}`)).body).toEqual(approval);

      for (const args of [
        { domain_id: 'dom_missing', title: 'x' },
        { domain_id: domain.id, title: '' },
        { domain_id: domain.id, title: 'x', extra: true },
      ]) {
        const rest = await t.call('POST', '/approvals', args);
        expect(problem(await mcp('request_approval', args))).toEqual(problem(rest));
      }

      const unknownAgent = { agent_id: 'agt_nowhere', text: 'hi' };
      const refused = await mcp('send_inbox', unknownAgent);
      expect(problem(refused)).toEqual(problem(await t.call('POST', '/inbox', unknownAgent)));
      expect(refused.body.code).toBe('agent_not_found');
      const empty = { agent_id: 'agt_nowhere', text: '', domain_id: domain.id };
      expect(problem(await mcp('send_inbox', empty))).toEqual(problem(await t.call('POST', '/inbox', empty)));

      const sent = await mcp('send_inbox', { agent_id: 'agt_nowhere', text: 'hi', domain_id: domain.id });
      expect(sent.status).toBe(200);
      const message = sent.body.result as { id: string };
      expect(message).toMatchObject({ domain_id: domain.id, agent_id: 'agt_nowhere', text: 'hi' });
      const inbox = (await t.call('GET', '/inbox?agent_id=agt_nowhere')).body.items as { id: string }[];
      expect(inbox).toEqual([message]);
      // Nothing refused above was written.
      expect((await t.call('GET', '/approvals')).body.items).toEqual([approval]);
    } finally {
      await t.close();
    }
  });
});
