// `svcd mcp`: the MCP server agents load (stdio). Each list and call goes to the local svcd
// over mgmt.sock, so a restarted svcd is picked up on the next call; stdout is the protocol,
// diagnostics go to stderr.
import type { Command } from 'commander';
import type { McpCallReply, McpToolsReply } from '../../daemon/mcp/bridge.js';
import { daemonPaths } from '../../daemon/paths.js';
import type { CliIO } from '../io.js';
import { mgmtCall } from '../mgmt-client.js';
import { VERSION } from '../version.js';

export function registerSvcdMcp(program: Command, io: CliIO): void {
  program
    .command('mcp')
    .description(
      'MCP server on stdio exposing the tower tools (mesh tasks, approvals, inbox, records); each call is ' +
        'validated by the local svcd (schema pack, Wasm booster) before it reaches the tower',
    )
    .addHelpText(
      'after',
      '\nNeeds a running svcd ("svc daemon up"); configure agents with the command `svcd mcp`.\nSee docs/validation.md.',
    )
    .action(async () => {
      // Loaded here, not at the top: the MCP SDK (with zod) is ≈10 MiB of heap that `svcd run`,
      // which registers this command too, must not carry (docs/perf-notes.md, daemon).
      const [{ StdioServerTransport }, { serveMcp }] = await Promise.all([
        import('@modelcontextprotocol/sdk/server/stdio.js'),
        import('../../daemon/mcp/stdio-server.js'),
      ]);
      const sock = daemonPaths(io.paths.home).mgmtSock;
      const transport = new StdioServerTransport();
      const server = await serveMcp(
        {
          tools: () => mgmtCall<McpToolsReply>(sock, 'mcp.tools'),
          call: (tool, args) => mgmtCall<McpCallReply>(sock, 'mcp.call', { tool, args }),
        },
        VERSION,
        transport,
      );
      await new Promise<void>((resolve) => {
        server.onclose = resolve;
        // The SDK's stdio transport does not end on EOF: the client going away ends us.
        process.stdin.once('end', () => void server.close());
      });
    });
}
