// POST /mcp/call: agents' tool calls, {"tool": name, "args": {…}} → {"result": …} or a
// problem. Arguments are validated against the schema pack: the embedded defaults
// (protocol/mesh.ts TOOL_ARGS), or SVC_SCHEMA_PACK_FILE's `{"tools": {name: schema}}` when set.
import { readFileSync } from 'node:fs';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { SvcError } from '../../protocol/errors.js';
import { McpCall, type MeshState, TOOL_ARGS, type ToolName } from '../../protocol/mesh.js';
import type { Scope } from '../../protocol/scopes.js';
import { hasScope } from '../auth/principal.js';
import type { TowerContext } from '../context.js';
import { fieldErrors, makeAjv } from '../http/validation.js';
import type { MeshService } from './service.js';

const READ_TOOLS = new Set<string>(['get_mesh_task', 'list_mesh_tasks']);

type Validator = ((x: unknown) => boolean) & { errors?: unknown[] | null };

export function loadSchemaPack(file: string | undefined): Record<string, object> {
  const pack: Record<string, object> = { ...TOOL_ARGS };
  if (!file) return pack;
  let parsed: { tools?: Record<string, object> };
  try {
    parsed = JSON.parse(readFileSync(file, 'utf8')) as { tools?: Record<string, object> };
  } catch (e) {
    throw new Error(`SVC_SCHEMA_PACK_FILE ${file}: ${(e as Error).message}`);
  }
  if (!parsed.tools || typeof parsed.tools !== 'object') {
    throw new Error(`SVC_SCHEMA_PACK_FILE ${file}: expected {"tools": {name: JSON schema}}`);
  }
  for (const [name, schema] of Object.entries(parsed.tools)) {
    if (!(name in TOOL_ARGS)) throw new Error(`SVC_SCHEMA_PACK_FILE ${file}: unknown tool "${name}"`);
    pack[name] = schema;
  }
  return pack;
}

export async function mcpRoutes(app: FastifyInstance, ctx: TowerContext, mesh: MeshService): Promise<void> {
  const ajv = makeAjv(false);
  const validators = new Map<string, Validator>();
  for (const [name, schema] of Object.entries(loadSchemaPack(process.env.SVC_SCHEMA_PACK_FILE))) {
    validators.set(name, ajv.compile(schema) as Validator);
  }

  /** Approvals and inbox go through their REST routes with the caller's own credential. */
  const forward = async (req: FastifyRequest, url: string, payload: unknown) => {
    const res = await app.inject({
      method: 'POST',
      url,
      headers: { authorization: req.headers.authorization ?? '', 'content-type': 'application/json' },
      payload: JSON.stringify(payload),
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
    schema: { body: McpCall },
    handler: async (req) => {
      const { tool, args } = req.body as McpCall;
      const validate = validators.get(tool);
      if (!validate) {
        throw new SvcError(
          'not_found',
          `unknown tool "${tool}": one of ${[...validators.keys()].join(', ')}`,
        );
      }
      const need: Scope = READ_TOOLS.has(tool) ? 'feed:read' : 'work:write';
      if (!hasScope(req.principal, need)) {
        throw new SvcError('forbidden', `tool ${tool} needs the "${need}" scope`);
      }
      if (!validate(args)) {
        const errors = fieldErrors('args', (validate.errors ?? []) as never[]);
        throw new SvcError(
          'validation_failed',
          `${tool}: ${errors.map((e) => `${e.field} ${e.message}`).join('; ')}`,
          {
            errors,
          },
        );
      }
      const p = req.principal;
      // Validated above against the tool's schema.
      const a = args as {
        agent_id: string;
        mission_id: string;
        task_id: string;
        lease_id: string;
        reason: string;
        state?: string;
      };
      let result: unknown;
      switch (tool as ToolName) {
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
      }
      return { result: result ?? null };
    },
  });
  void ctx;
}
