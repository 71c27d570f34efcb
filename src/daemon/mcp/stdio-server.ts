// `svcd mcp`: an MCP server on stdio (@modelcontextprotocol/sdk) that agents load. It lists
// the tools and argument schemas svcd enforces and sends each call through svcd (mgmt.sock
// mcp.call), which validates it and only then calls the tower. It holds no credential. With
// svcd down it still lists the tools (embedded schemas) and answers each call with a tool error.
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import {
  CallToolRequestSchema,
  type CallToolResult,
  ListToolsRequestSchema,
} from '@modelcontextprotocol/sdk/types.js';
import { isSvcError } from '../../protocol/errors.js';
import type { McpCallReply, McpToolsReply } from './bridge.js';
import { describeTools, type McpToolDescription } from './tools.js';

/** How the server reaches svcd (mgmt.sock in `svcd mcp`; injectable for tests). */
export interface SvcdCalls {
  tools(): Promise<McpToolsReply>;
  call(tool: string, args: Record<string, unknown>): Promise<McpCallReply>;
}

export function createMcpServer(svcd: SvcdCalls, version: string): Server {
  const server = new Server(
    { name: 'svcd', version },
    {
      capabilities: { tools: {} },
      instructions:
        'Tools of the svc tower (mesh tasks, approvals, inbox, records). svcd validates every call ' +
        'against its schema pack and Wasm booster before it reaches the tower.',
    },
  );

  server.setRequestHandler(ListToolsRequestSchema, async () => {
    let tools: McpToolDescription[];
    try {
      ({ tools } = await svcd.tools());
    } catch (e) {
      // svcd down or still starting: the agent still learns its tools (with the embedded
      // schemas); a call then answers with a tool error saying svcd is not running.
      if (!isSvcError(e) || e.code !== 'unavailable') throw e;
      tools = describeTools();
    }
    return {
      tools: tools.map((t) => ({
        name: t.name,
        description: t.description,
        inputSchema: t.input_schema as { type: 'object'; [k: string]: unknown },
      })),
    };
  });

  server.setRequestHandler(CallToolRequestSchema, async (req): Promise<CallToolResult> => {
    try {
      const reply = await svcd.call(req.params.name, req.params.arguments ?? {});
      return {
        content: [{ type: 'text', text: JSON.stringify(reply.result) }],
        // Not a schema'd output: a hint for clients that read _meta.
        _meta: { answered_by: reply.answered_by },
      };
    } catch (e) {
      // A refused call is a tool error the model can read and correct, not a protocol error.
      if (!isSvcError(e)) throw e;
      const fields = (e.errors ?? []).map((f) => `\n- ${f.field}: ${f.message}`).join('');
      return {
        isError: true,
        content: [{ type: 'text', text: `${e.code}: ${e.message}${fields}` }],
        _meta: { code: e.code, ...(e.errors ? { errors: e.errors } : {}) },
      };
    }
  });

  return server;
}

export async function serveMcp(svcd: SvcdCalls, version: string, transport: Transport): Promise<Server> {
  const server = createMcpServer(svcd, version);
  await server.connect(transport);
  return server;
}
