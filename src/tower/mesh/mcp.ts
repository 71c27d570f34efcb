// POST /mcp/call: agents' tool calls, {"tool": name, "args": {…}} → {"result": …} or a
// problem. Arguments are validated against the schema pack (protocol/schema-pack.ts): the
// embedded defaults, or SVC_SCHEMA_PACK_FILE's `{"tools": {name: schema}}` when set (an
// invalid file is logged and the defaults are enforced).
import type { FastifyRequest } from 'fastify';
import { SvcError } from '../../protocol/errors.js';
import { MCP_TOOLS } from '../../protocol/mcp-tools.js';
import type { MeshState } from '../../protocol/mesh.js';
import { type CompiledSchemaPack, loadSchemaPack } from '../../protocol/schema-pack.js';
import { hasScope } from '../auth/principal.js';
import type { TowerContext } from '../context.js';
import type { TowerApp } from '../http/app.js';
import { refuseNul } from '../http/validation.js';
import { meshSchemas } from './schemas.js';
import type { MeshService } from './service.js';

export async function mcpRoutes(app: TowerApp, ctx: TowerContext, mesh: MeshService): Promise<void> {
  const loaded = await loadSchemaPack(
    process.env.SVC_SCHEMA_PACK_FILE || undefined,
    ctx.log.child({ component: 'mcp' }),
  );
  const pack: CompiledSchemaPack = loaded.pack;

  /** Approvals, inbox and records go through their REST routes with the caller's own credential. */
  const forward = async (req: FastifyRequest, url: string, payload?: unknown) => {
    const res = await app.inject({
      method: payload === undefined ? 'GET' : 'POST',
      url,
      headers: {
        authorization: req.headers.authorization ?? '',
        ...(payload === undefined ? {} : { 'content-type': 'application/json' }),
      },
      ...(payload === undefined ? {} : { payload: JSON.stringify(payload) }),
    });
    const body = res.body ? (JSON.parse(res.body) as Record<string, unknown>) : {};
    if (res.statusCode >= 400) {
      throw new SvcError(
        (body.code as never) ?? 'bad_request',
        String(body.detail ?? `HTTP ${res.statusCode}`),
      );
    }
    return body;
  };

  app.post('/mcp/call', {
    config: { scope: 'feed:read' },
    schema: meshSchemas.mcpCall,
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
      const p = req.principal;
      // Validated above against the tool's schema.
      const a = args as {
        agent_id: string;
        mission_id: string;
        task_id: string;
        lease_id: string;
        reason: string;
        state?: string;
        domain_id: string;
        document_id: string;
        artifact_id: string;
      };
      const path = (...ids: string[]) => ids.map(encodeURIComponent).join('/');
      const { domain_id: _d, mission_id: _m, ...recordBody } = args as Record<string, unknown>;
      let result: unknown;
      switch (tool) {
        case 'submit_mesh_task': {
          const { mission_id, ...body } = args as { mission_id: string };
          result = await mesh.create(p, mission_id, body as never);
          break;
        }
        case 'claim_mesh_task':
          result = await mesh.claim(p, a.agent_id, (args as { mission_id?: string }).mission_id);
          break;
        case 'claim_mesh_tasks': {
          const { mission_id, max } = args as { mission_id?: string; max: number };
          result = { items: await mesh.claimMany(p, a.agent_id, mission_id, max) };
          break;
        }
        case 'start_mesh_task':
          result = await mesh.start(p, a.task_id, a.lease_id);
          break;
        case 'heartbeat_mesh_task':
          result = await mesh.heartbeat(p, a.task_id, a.lease_id);
          break;
        case 'report_progress':
          await mesh.progress(p, a.task_id, a.lease_id, args as never);
          result = {};
          break;
        case 'complete_mesh_task':
          result = await mesh.complete(p, a.task_id, a.lease_id, (args as { result?: unknown }).result);
          break;
        case 'complete_mesh_tasks':
          result = {
            items: await mesh.completeMany(
              p,
              (args as { items: { task_id: string; lease_id: string; result?: unknown }[] }).items,
            ),
          };
          break;
        case 'fail_mesh_task':
          result = await mesh.fail(p, a.task_id, a.lease_id, a.reason);
          break;
        case 'retry_mesh_task':
          result = await mesh.retry(p, a.task_id);
          break;
        case 'get_mesh_task':
          result = await mesh.get(p, a.task_id);
          break;
        case 'list_mesh_tasks':
          result = {
            items: await mesh.list(p, a.mission_id, {
              ...(a.state ? { state: a.state as MeshState } : {}),
              limit: 500,
              after: null,
            }),
          };
          break;
        case 'request_approval':
          result = await forward(req, '/approvals', args);
          break;
        case 'send_inbox':
          result = await forward(req, '/inbox', args);
          break;
        case 'create_domain':
          result = await forward(req, '/domains', args);
          break;
        case 'create_mission':
          result = await forward(req, `/domains/${path(a.domain_id)}/m`, recordBody);
          break;
        case 'create_document':
          result = await forward(
            req,
            `/domains/${path(a.domain_id, 'm', a.mission_id)}/documents`,
            recordBody,
          );
          break;
        case 'create_artifact':
          result = await forward(
            req,
            `/domains/${path(a.domain_id, 'm', a.mission_id)}/artifacts`,
            recordBody,
          );
          break;
        case 'get_domain':
          result = await forward(req, `/domains/${path(a.domain_id)}`);
          break;
        case 'get_mission':
          result = await forward(req, `/domains/${path(a.domain_id, 'm', a.mission_id)}`);
          break;
        case 'get_document':
          result = await forward(
            req,
            `/domains/${path(a.domain_id, 'm', a.mission_id, 'documents', a.document_id)}`,
          );
          break;
        case 'get_artifact':
          result = await forward(
            req,
            `/domains/${path(a.domain_id, 'm', a.mission_id, 'artifacts', a.artifact_id)}`,
          );
          break;
      }
      return { result: result ?? null };
    },
  });
  void ctx;
}
