// mgmt.sock methods of the MCP bridge, as a table daemon.ts registers: mcp.call (arguments
// checked against McpCall before the bridge sees them) and mcp.tools.
import { McpCall } from '../../protocol/mesh.js';
import { type MgmtMethod, method } from '../mgmt/method.js';
import type { McpBridge } from './bridge.js';

export function mcpMethods(bridge: McpBridge): MgmtMethod[] {
  return [
    method('mcp.call', async (params) => bridge.call(params as McpCall), McpCall),
    method('mcp.tools', async () => bridge.tools()),
  ];
}
