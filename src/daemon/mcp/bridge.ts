// The MCP bridge of svcd: `call` (validate, then forward to the tower's /mcp/call with the
// node JWT) and `tools` (the tools and the argument schemas in force), which `svcd mcp` serves
// to agents over stdio through mgmt.sock (methods.ts). Deciding is validate/'s; this is the shell.
import type { Clock } from '../../lib/clock.js';
import type { Logger } from '../../lib/log.js';
import { SvcError } from '../../protocol/errors.js';
import type { McpCall } from '../../protocol/mesh.js';
import { type LoadedSchemaPack, loadSchemaPack } from '../../protocol/schema-pack.js';
import type { Component } from '../component.js';
import type { TowerApi } from '../tower-client/api.js';
import type { EventOutbox } from '../tower-client/outbox.js';
import { type Booster, embeddedBooster, loadBooster } from '../validate/booster.js';
import { createToolCallValidation, type ToolCallValidation } from '../validate/pipeline.js';
import { describeTools, type McpToolDescription } from './tools.js';

export interface McpToolsReply {
  tools: McpToolDescription[];
  schema_pack: string;
  booster: string;
}

/** `answered_by: "booster"` when the booster short-circuited (no HTTP call was made). */
export interface McpCallReply {
  result: unknown;
  answered_by: 'tower' | 'booster';
}

/** What a short-circuited call answers: success, with no tower result. */
export const BOOSTER_ANSWER = { ok: true } as const;

/** What the bridge uses of svcd (daemon.ts passes its DaemonContext). */
export interface McpBridgeContext {
  clock: Clock;
  log: Logger;
  /** SVC_SCHEMA_PACK_FILE: a schema pack instead of the built-in one. */
  env: NodeJS.ProcessEnv;
  tower: TowerApi;
  /** Validation telemetry goes to the feed. */
  events: EventOutbox;
}

export interface McpBridge extends Component {
  /** mcp.call: the verdict first; a call it lets through goes to the tower. */
  call(call: McpCall): Promise<McpCallReply>;
  /** mcp.tools */
  tools(): McpToolsReply;
}

export function createMcpBridge(
  ctx: McpBridgeContext,
  opts: { boosterWasm?: string | undefined },
): McpBridge {
  const log = ctx.log.child({ component: 'validate' });
  let loaded: LoadedSchemaPack | null = null;
  let booster: Booster | null = null;
  let validation: ToolCallValidation | null = null;
  let calls = 0;
  let answered = 0;

  const ready = () => {
    if (!validation || !loaded || !booster)
      throw new SvcError('unavailable', 'svcd is still starting; retry');
    return { validation, loaded, booster };
  };

  return {
    name: 'mcp',
    async call({ tool, args }) {
      const v = ready().validation;
      calls++;
      if ((await v.check(tool, args)) === 'answer') {
        answered++;
        return { result: BOOSTER_ANSWER, answered_by: 'booster' };
      }
      const reply = await ctx.tower.request<{ result: unknown }>('POST', '/mcp/call', { tool, args });
      return { result: reply.result, answered_by: 'tower' };
    },
    tools() {
      const r = ready();
      return {
        tools: describeTools(r.loaded.pack.pack.tools),
        schema_pack: r.loaded.pack.source,
        booster: r.booster.source,
      };
    },
    async start() {
      loaded = await loadSchemaPack(ctx.env.SVC_SCHEMA_PACK_FILE || undefined, log);
      booster = opts.boosterWasm
        ? await loadBooster(opts.boosterWasm, { clock: ctx.clock })
        : embeddedBooster();
      if (booster.loadError)
        log.error({ error: booster.loadError }, 'booster cannot run; every MCP call is refused');
      const b = booster;
      validation = createToolCallValidation({
        pack: loaded.pack,
        booster: b,
        emit: (event) => {
          ctx.events
            .publish(event)
            .catch((e: unknown) => log.warn({ err: e }, 'validation telemetry not recorded'));
        },
        micros: () => performance.now() * 1000,
      });
    },
    async stop() {
      validation = null;
      await booster?.close();
    },
    status: () => ({
      schema_pack: { source: loaded?.pack.source ?? null, error: loaded?.error ?? null },
      booster: { source: booster?.source ?? null, error: booster?.loadError ?? null },
      calls,
      answered_by_booster: answered,
    }),
  };
}
