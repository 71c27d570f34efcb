// The MCP approval, inbox and record tools run the services their REST routes run: the same
// records, refusals and validation messages as the routes, whatever the schema pack allows.
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { makeTempDir } from '../../../test/support/tmp.js';
import { STORES, startTestTower } from '../../../test/support/tower.js';

describe.each(STORES)('MCP approval, inbox and record tools on %s', (store) => {
  const tmp = makeTempDir('svc-mcp-apr-');
  afterAll(() => {
    tmp.remove();
  });

  it('answer as the REST routes do, and refuse what they refuse with the same problem', async () => {
    // A pack looser than the routes: the routes' own body rules still hold.
    const file = join(tmp.dir, 'pack.json');
    writeFileSync(
      file,
      JSON.stringify({
        tools: Object.fromEntries(
          ['request_approval', 'send_inbox', 'create_domain', 'create_mission', 'get_mission'].map((n) => [
            n,
            { type: 'object' },
          ]),
        ),
      }),
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
      expect(approval).toMatchObject({
        domain_id: domain.id,
        title: 'ship it?',
        status: 'pending',
        detail: '',
      });
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

      // Records: domains are tower-wide, as their route says; bodies are checked as the route does.
      const limited = (
        await t.call('POST', '/tokens', { name: 'limited', scopes: ['admin'], domains: [domain.id] })
      ).body as { token: string };
      const wide = await t.call(
        'POST',
        '/mcp/call',
        { tool: 'create_domain', args: { name: 'e' } },
        limited.token,
      );
      expect(problem(wide)).toEqual(problem(await t.call('POST', '/domains', { name: 'e' }, limited.token)));
      expect(wide.status).toBe(403);
      for (const args of [{ name: '' }, { name: 'x', domain_id: domain.id }]) {
        expect(problem(await mcp('create_domain', args))).toEqual(
          problem(await t.call('POST', '/domains', args)),
        );
      }
      const badMission = { domain_id: domain.id, name: 'm', colour: 'red' };
      expect(problem(await mcp('create_mission', badMission))).toEqual(
        problem(await t.call('POST', `/domains/${domain.id}/m`, { name: 'm', colour: 'red' })),
      );
      const missing = { domain_id: 'dom_missing', name: 'm' };
      expect(problem(await mcp('create_mission', missing))).toEqual(
        problem(await t.call('POST', '/domains/dom_missing/m', { name: 'm' })),
      );
      const mission = (await mcp('create_mission', { domain_id: domain.id, name: 'm' })).body.result as {
        id: string;
      };
      const path = `/domains/${domain.id}/m/${mission.id}`;
      expect(
        (await mcp('get_mission', { domain_id: domain.id, mission_id: mission.id })).body.result,
      ).toEqual((await t.call('GET', path)).body);
      const other = { domain_id: domain.id, mission_id: 'mis_missing' };
      expect(problem(await mcp('get_mission', other))).toEqual(
        problem(await t.call('GET', `/domains/${domain.id}/m/mis_missing`)),
      );
    } finally {
      await t.close();
    }
  });
});
