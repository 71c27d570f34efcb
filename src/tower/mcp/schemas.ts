// The MCP route's schema (http/route-schema.ts): POST /mcp/call. The tools' arguments are
// checked by the schema pack, not here (mcp/plugin.ts).
import { Type } from '@sinclair/typebox';
import { McpCall } from '../../protocol/mesh.js';
import { route } from '../http/route-schema.js';

export const mcpSchemas = {
  mcpCall: route({
    summary: 'Call an MCP tool',
    description: 'The tools and their arguments: docs/mesh.md. Each tool needs its own scope.',
    tags: ['mcp'],
    body: McpCall,
    response: {
      200: Type.Object(
        { result: Type.Unknown() },
        { description: "the tool's result", additionalProperties: false },
      ),
    },
    errors: [
      'not_found',
      'agent_not_found',
      'conflict',
      'illegal_transition',
      'stale_lease',
      'already_decided',
      'validation_rejected',
    ],
    writes: true,
  }),
};
