import { join } from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { InMemoryTransport } from '@modelcontextprotocol/sdk/inMemory.js';
import { afterEach, describe, expect, it } from 'vitest';
import { makeTempDir } from '../../../test/support/tmp.js';
import { mgmtCall } from '../../cli/mgmt-client.js';
import { SvcError } from '../../protocol/errors.js';
import { MCP_TOOLS } from '../../protocol/mcp-tools.js';
import type { McpCallReply, McpToolsReply } from './bridge.js';
import { type SvcdCalls, serveMcp } from './stdio-server.js';
import { describeTools } from './tools.js';

const closers: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const c of closers.splice(0)) await c();
});

async function connect(svcd: SvcdCalls): Promise<Client> {
  const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
  const server = await serveMcp(svcd, 'test', serverSide);
  const client = new Client({ name: 'test', version: '1' });
  await client.connect(clientSide);
  closers.push(
    () => client.close(),
    () => server.close(),
  );
  return client;
}

const tools: McpToolsReply = {
  tools: [
    {
      name: 'get_mesh_task',
      description: 'Read one mesh task.',
      input_schema: { type: 'object', required: ['task_id'], properties: { task_id: { type: 'string' } } },
    },
  ],
  schema_pack: 'embedded',
  booster: 'embedded',
};

describe('svcd mcp server', () => {
  it('lists the tools svcd reports, with their schemas as inputSchema', async () => {
    const client = await connect({
      tools: async () => tools,
      call: async () => ({ result: null, answered_by: 'tower' }),
    });
    expect((await client.listTools()).tools).toEqual([
      {
        name: 'get_mesh_task',
        description: 'Read one mesh task.',
        inputSchema: { type: 'object', required: ['task_id'], properties: { task_id: { type: 'string' } } },
      },
    ]);
  });

  it('returns the tower result as JSON text and says who answered', async () => {
    const calls: unknown[] = [];
    const client = await connect({
      tools: async () => tools,
      call: async (tool, args): Promise<McpCallReply> => {
        calls.push([tool, args]);
        return { result: { id: 'mt_1', state: 'pending' }, answered_by: 'tower' };
      },
    });
    const r = await client.callTool({ name: 'get_mesh_task', arguments: { task_id: 'mt_1' } });
    expect(calls).toEqual([['get_mesh_task', { task_id: 'mt_1' }]]);
    expect(r.content).toEqual([{ type: 'text', text: '{"id":"mt_1","state":"pending"}' }]);
    expect(r._meta).toEqual({ answered_by: 'tower' });
  });

  it('turns a refusal into a tool error naming the code and each field', async () => {
    const client = await connect({
      tools: async () => tools,
      call: async () => {
        throw new SvcError('validation_failed', 'get_mesh_task: args/task_id must be string', {
          errors: [{ field: 'args/task_id', message: 'must be string' }],
        });
      },
    });
    const r = await client.callTool({ name: 'get_mesh_task', arguments: { task_id: 5 } });
    expect(r.isError).toBe(true);
    expect(r.content).toEqual([
      {
        type: 'text',
        text: 'validation_failed: get_mesh_task: args/task_id must be string\n- args/task_id: must be string',
      },
    ]);
    expect(r._meta).toEqual({
      code: 'validation_failed',
      errors: [{ field: 'args/task_id', message: 'must be string' }],
    });
  });

  it('lists the tools with the embedded schemas while svcd is down, and answers a call with a tool error saying so', async () => {
    const tmp = makeTempDir('svcd-mcp-down-');
    closers.push(async () => tmp.remove());
    // What `svcd mcp` does, on a mgmt.sock nobody serves.
    const sock = join(tmp.dir, 'mgmt.sock');
    const client = await connect({
      tools: () => mgmtCall<McpToolsReply>(sock, 'mcp.tools'),
      call: (tool, args) => mgmtCall<McpCallReply>(sock, 'mcp.call', { tool, args }),
    });
    const listed = (await client.listTools()).tools;
    expect(listed.map((t) => t.name)).toEqual(Object.keys(MCP_TOOLS));
    expect(listed.map((t) => t.inputSchema)).toEqual(describeTools().map((t) => t.input_schema));
    const r = await client.callTool({ name: 'get_mesh_task', arguments: { task_id: 'mt_1' } });
    expect(r.isError).toBe(true);
    expect(r._meta).toEqual({ code: 'unavailable' });
    expect(r.content).toEqual([
      {
        type: 'text',
        text: `unavailable: svcd is not running (cannot connect to ${sock}: ENOENT); start it with "svc daemon up"`,
      },
    ]);
  });

  it('still fails tools/list for an error other than svcd being unavailable', async () => {
    const client = await connect({
      tools: async () => {
        throw new SvcError('internal', 'broken');
      },
      call: async () => ({ result: null, answered_by: 'tower' }),
    });
    await expect(client.listTools()).rejects.toThrow();
  });
});
