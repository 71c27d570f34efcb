// POST /mcp/call: agents' tool calls, {"tool": name, "args": {…}} → {"result": …} or a
// problem. Arguments are validated against the schema pack (protocol/schema-pack.ts): the
// embedded defaults, or the file's `{"tools": {name: schema}}` that the entry point names
// (SVC_SCHEMA_PACK_FILE; an invalid file is logged and the defaults are enforced). Each
// tool is an entry of the table in tools.ts.
import fp from 'fastify-plugin';
import type { Logger } from '../../lib/log.js';
import { SvcError } from '../../protocol/errors.js';
import { MCP_TOOLS } from '../../protocol/mcp-tools.js';
import { type CompiledSchemaPack, loadSchemaPack } from '../../protocol/schema-pack.js';
import { hasScope } from '../auth/principal.js';
import type { ApprovalService } from '../feed/approvals.js';
import type { TowerApp } from '../http/app.js';
import { refuseNul } from '../http/validation.js';
import type { MeshService } from '../mesh/service.js';
import type { RecordCollections } from '../records/routes.js';
import { mcpSchemas } from './schemas.js';
import { approvalTools, meshTools, recordTools, type Tool } from './tools.js';

/** What the MCP route uses. */
export interface McpDeps {
  log: Logger;
  mesh: MeshService;
  /** Approvals and inbox, as their routes run them. */
  approvals: ApprovalService;
  /** The record collections, as their routes use them. */
  records: RecordCollections;
  /** A schema pack instead of the embedded one (SVC_SCHEMA_PACK_FILE at the CLI). */
  schemaPackFile?: string;
}

export const mcpRoutes = fp(
  async (app: TowerApp, deps: McpDeps) => {
    const loaded = await loadSchemaPack(deps.schemaPackFile, deps.log.child({ component: 'mcp' }));
    const pack: CompiledSchemaPack = loaded.pack;
    const tools: Record<string, Tool> = {
      ...meshTools(deps.mesh),
      ...approvalTools(deps.approvals),
      ...recordTools(deps.records),
    };

    app.post('/mcp/call', {
      config: { scope: 'feed:read' },
      schema: mcpSchemas.mcpCall,
      handler: async (req) => {
        const { tool, args } = req.body;
        const known = Object.hasOwn(MCP_TOOLS, tool);
        // Scope before arguments, so a caller without it learns nothing about the schemas.
        const need = known ? MCP_TOOLS[tool as keyof typeof MCP_TOOLS].scope : 'feed:read';
        if (known && !hasScope(req.principal, need)) {
          throw new SvcError('forbidden', `tool ${tool} needs the "${need}" scope`);
        }
        pack.check(tool, args);
        // Arguments' own strings go to text columns (nested objects are stored as JSON): the
        // rule of every REST body (http/validation.ts), whatever the schema pack allows.
        refuseNul('args', args);
        const run = Object.hasOwn(tools, tool) ? tools[tool] : undefined;
        const result = run
          ? await run({
              principal: req.principal,
              args: args as Record<string, unknown>,
            })
          : undefined;
        return { result: result ?? null };
      },
    });
  },
  { name: 'svc-mcp' },
);
