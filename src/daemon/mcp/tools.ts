// The MCP tool list as agents see it: each tool's name, description and argument schema.
// svcd lists it from the schema pack in force; `svcd mcp` falls back to the embedded defaults
// when svcd cannot be asked, so an agent still sees its tools.
import { MCP_TOOL_ARGS, MCP_TOOLS, type McpToolName } from '../../protocol/mcp-tools.js';

export interface McpToolDescription {
  name: McpToolName;
  description: string;
  /** JSON Schema of `args` (always an object schema, as MCP requires). */
  input_schema: Record<string, unknown>;
}

/** Every tool, with the argument schemas of `schemas` (default: the embedded ones). */
export function describeTools(
  schemas: Record<McpToolName, object | boolean> = MCP_TOOL_ARGS,
): McpToolDescription[] {
  return (Object.keys(MCP_TOOLS) as McpToolName[]).map((name) => ({
    name,
    description: MCP_TOOLS[name].description,
    input_schema: objectSchema(schemas[name]),
  }));
}

/** MCP lists input schemas as JSON objects of type "object"; a pack may give `true` or omit type. */
function objectSchema(schema: object | boolean): Record<string, unknown> {
  if (typeof schema === 'boolean') return { type: 'object' };
  // JSON round trip: TypeBox schemas carry symbol keys that are not part of the wire shape.
  const s = JSON.parse(JSON.stringify(schema)) as Record<string, unknown>;
  return s.type === 'object' ? s : { type: 'object', ...s };
}
