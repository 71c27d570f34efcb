// `svcd mcp` driven by the official MCP client (@modelcontextprotocol/sdk, StdioClientTransport)
// against a real tower and svcd: tools are listed and called; a payload the schema pack or the
// Wasm booster refuses never reaches the tower (its /metrics request count does not move);
// boosters built from WAT with wabt reject, pass, short-circuit, trap, loop, or lack exports.
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MgmtClient } from '../../src/cli/mgmt-client.js';
import { MCP_TOOLS } from '../../src/protocol/mcp-tools.js';
import { type NodeStack, startNodeStack } from '../support/node-stack.js';
import { waitFor } from '../support/poll.js';
import { type Proc, run, SVC_BIN, SVCD_BIN } from '../support/procs.js';
import { WAT, writeWasm } from '../support/wasm.js';

interface ToolResult {
  isError?: boolean;
  content: { type: string; text: string }[];
  _meta?: Record<string, unknown>;
}

describe('svcd mcp with the official MCP client', () => {
  let stack: NodeStack;
  let client: Client;
  let missionId: string;

  const svc = (args: string[]) => stack.svc(args);
  const admin = (method: string, path: string, body?: unknown) => stack.admin(method, path, body);
  /** POST /mcp/call requests the tower has answered, by its own metrics. */
  const towerMcpCalls = async () => {
    const text = await (await admin('GET', '/metrics')).text();
    let n = 0;
    for (const m of text.matchAll(
      /^svc_http_request_duration_seconds_count\{[^}]*route="\/mcp\/call"[^}]*\} (\d+)/gm,
    )) {
      n += Number(m[1]);
    }
    return n;
  };
  const connect = async (env: NodeJS.ProcessEnv = stack.env) => {
    const c = new Client({ name: 'e2e-agent', version: '1.0.0' });
    await c.connect(
      new StdioClientTransport({
        command: process.execPath,
        args: [SVCD_BIN, 'mcp'],
        env: env as Record<string, string>,
        stderr: 'pipe',
      }),
    );
    return c;
  };
  const call = async (name: string, args: Record<string, unknown>) =>
    (await client.callTool({ name, arguments: args })) as unknown as ToolResult;
  const submit = (title: string, extra: Record<string, unknown> = {}) =>
    call('submit_mesh_task', { mission_id: missionId, title, description: 'from mcp', ...extra });
  /** Calls `fn` and returns its result and how many /mcp/call requests the tower saw meanwhile. */
  const counting = async <T>(fn: () => Promise<T>): Promise<[T, number]> => {
    const before = await towerMcpCalls();
    const r = await fn();
    return [r, (await towerMcpCalls()) - before];
  };

  beforeAll(async () => {
    stack = await startNodeStack({ name: 'mcp', svcd: false });
    const domain = (await (await admin('POST', '/domains', { name: 'mcp' })).json()) as { id: string };
    missionId = (
      (await (await admin('POST', `/domains/${domain.id}/m`, { name: 'm' })).json()) as { id: string }
    ).id;
    // svcd's own pack is stricter than the tower's: a mesh task needs a description.
    const pack = join(stack.tmp.dir, 'pack.json');
    writeFileSync(
      pack,
      JSON.stringify({
        tools: {
          submit_mesh_task: {
            type: 'object',
            required: ['mission_id', 'title', 'description'],
            properties: {
              mission_id: { type: 'string' },
              title: { type: 'string', minLength: 1 },
              description: { type: 'string', minLength: 1 },
            },
            additionalProperties: false,
          },
        },
      }),
    );
    const booster = await writeWasm(stack.tmp.dir, 'by-marker', WAT.byMarker);
    await stack.startSvcd(['--booster-wasm', booster], { SVC_SCHEMA_PACK_FILE: pack });
    client = await connect();
  });
  afterAll(async () => {
    await client?.close();
    // The detached svcd of the last test, if it failed before stopping it.
    if (stack) await run(SVC_BIN, ['daemon', 'down'], stack.cli);
    await stack?.stop();
  });

  it('lists every tower tool with the argument schema svcd enforces', async () => {
    const { tools } = await client.listTools();
    expect(tools.map((t) => t.name).sort()).toEqual(Object.keys(MCP_TOOLS).sort());
    const submitTool = tools.find((t) => t.name === 'submit_mesh_task');
    expect(submitTool?.inputSchema.required).toEqual(['mission_id', 'title', 'description']);
    expect(tools.find((t) => t.name === 'claim_mesh_task')?.inputSchema.required).toEqual(['agent_id']);
  });

  it('forwards a valid call to the tower and returns its result', async () => {
    const [r, requests] = await counting(() => submit('build it'));
    expect(r.isError).toBeFalsy();
    const task = JSON.parse(r.content[0]?.text ?? '') as { mission_id: string; title: string; state: string };
    expect(task).toMatchObject({ mission_id: missionId, title: 'build it', state: 'pending' });
    expect(r._meta?.answered_by).toBe('tower');
    expect(requests).toBe(1);
    const [listed] = await counting(() => call('list_mesh_tasks', { mission_id: missionId }));
    expect((JSON.parse(listed.content[0]?.text ?? '') as { items: unknown[] }).items).toHaveLength(1);
  });

  it('rejects payloads the schema pack refuses before any HTTP request', async () => {
    const [missing, r1] = await counting(() =>
      call('submit_mesh_task', { mission_id: missionId, title: 'x' }),
    );
    expect(missing.isError).toBe(true);
    expect(missing.content[0]?.text).toBe(
      'validation_failed: submit_mesh_task: args/description is required\n- args/description: is required',
    );
    const [wrongType, r2] = await counting(() => call('claim_mesh_task', { agent_id: 42 }));
    expect(wrongType._meta?.errors).toEqual([{ field: 'args/agent_id', message: 'must be string' }]);
    const [unknown, r3] = await counting(() => call('drop_everything', {}));
    expect(unknown.content[0]?.text).toMatch(/^not_found: unknown tool "drop_everything"/);
    expect([r1, r2, r3]).toEqual([0, 0, 0]);
  });

  it('applies the booster verdicts: reject and short-circuit make no HTTP request', async () => {
    const [rejected, r1] = await counting(() => submit('please #reject me'));
    expect(rejected.isError).toBe(true);
    expect(rejected.content[0]?.text).toMatch(
      /^validation_rejected: submit_mesh_task: rejected by the booster/,
    );
    const [answered, r2] = await counting(() => submit('cached #answer'));
    expect(answered.isError).toBeFalsy();
    expect(JSON.parse(answered.content[0]?.text ?? '')).toEqual({ ok: true });
    expect(answered._meta?.answered_by).toBe('booster');
    const [passed, r3] = await counting(() => submit('plain'));
    expect(passed.isError).toBeFalsy();
    expect([r1, r2, r3]).toEqual([0, 0, 1]);
  });

  it('refuses the call of a booster that traps or loops, and svcd keeps serving', async () => {
    const [trapped, r1] = await counting(() => submit('#trap'));
    expect(trapped.content[0]?.text).toMatch(/booster failed, so the call is refused: trapped: unreachable$/);
    const [looped, r2] = await counting(() => submit('#loop'));
    expect(looped.content[0]?.text).toMatch(/ran longer than the 250 ms time limit$/);
    expect([r1, r2]).toEqual([0, 0]);
    const [after, r3] = await counting(() => submit('after the loop'));
    expect(after.isError).toBeFalsy();
    expect(r3).toBe(1);
    expect(stack.svcd?.child.exitCode).toBeNull();
  });

  it('serves mgmt.sock mcp.call with the same checks', async () => {
    const c = await MgmtClient.connect(stack.mgmtSock);
    try {
      const ok = await c.call<{ result: { title: string }; answered_by: string }>('mcp.call', {
        tool: 'submit_mesh_task',
        args: { mission_id: missionId, title: 'over mgmt', description: 'd' },
      });
      expect([ok.result.title, ok.answered_by]).toEqual(['over mgmt', 'tower']);
      await expect(
        c.call('mcp.call', { tool: 'submit_mesh_task', args: { mission_id: missionId } }),
      ).rejects.toMatchObject({
        code: 'validation_failed',
      });
    } finally {
      c.close();
    }
  });

  it('reports each validation as a progress event with its verdict and microseconds', async () => {
    const lines = (await svc(['--json', 'feed', '--since', '0', '--type', 'progress', '--limit', '13']))
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { status: string; payload: Record<string, unknown> })
      .filter((e) => e.payload.kind === 'validation');
    const seen = lines.map((e) => `${e.payload.tool}:${e.payload.stage}:${e.status}`);
    expect(seen).toEqual([
      'submit_mesh_task:booster:pass',
      'list_mesh_tasks:booster:pass',
      'submit_mesh_task:schema:reject',
      'claim_mesh_task:schema:reject',
      'drop_everything:schema:reject',
      'submit_mesh_task:booster:reject',
      'submit_mesh_task:booster:short_circuit',
      'submit_mesh_task:booster:pass',
      'submit_mesh_task:booster:error',
      'submit_mesh_task:booster:error',
      'submit_mesh_task:booster:pass',
      'submit_mesh_task:booster:pass',
      'submit_mesh_task:schema:reject',
    ]);
    for (const e of lines) expect(typeof e.payload.micros).toBe('number');
  });

  it('refuses every call when the booster lacks its exports, and falls back from an invalid pack', async () => {
    await client.close();
    const svcd = stack.svcd as Proc;
    svcd.kill('SIGTERM');
    await svcd.exited;
    const pack = join(stack.tmp.dir, 'bad-pack.json');
    writeFileSync(pack, '{"tools": {"submit_mesh_task": {"type": "strnig"}}}');
    const booster = await writeWasm(stack.tmp.dir, 'no-exports', WAT.missingExports);
    // Through `svc daemon up`, which passes --booster-wasm on to `svcd run`.
    const up = await run(
      SVC_BIN,
      ['--json', 'daemon', 'up', '--no-systemd', '--backend-url', stack.tower.url, '--booster-wasm', booster],
      { ...stack.cli, SVC_SCHEMA_PACK_FILE: pack },
    );
    expect(up.code, up.stderr).toBe(0);
    const record = JSON.parse(up.stdout) as { booster_wasm?: string; log?: string };
    expect(record.booster_wasm).toBe(booster);
    // mgmt.sock answers before every component has started: wait for the bridge.
    type Status = {
      components?: { mcp?: { schema_pack: { error: string | null }; booster: { error: string | null } } };
    };
    const status = await waitFor('the MCP bridge to start', async () => {
      const s = JSON.parse(await svc(['--json', 'daemon', 'status'])) as Status;
      return s.components?.mcp?.booster.error ? s : null;
    });
    expect(status.components?.mcp?.schema_pack.error).toMatch(/tools\.submit_mesh_task: schema is invalid/);
    expect(status.components?.mcp?.booster.error).toMatch(/does not export alloc/);
    expect(readFileSync(record.log ?? '', 'utf8')).toContain(
      'invalid schema pack; using the embedded defaults',
    );
    client = await connect();
    const { tools } = await client.listTools();
    // The embedded default: description is optional again.
    expect(tools.find((t) => t.name === 'submit_mesh_task')?.inputSchema.required).toEqual([
      'mission_id',
      'title',
    ]);
    const [refused, requests] = await counting(() => call('get_mesh_task', { task_id: 'mt_x' }));
    expect(refused.content[0]?.text).toMatch(
      /validation_rejected: get_mesh_task: the booster failed.*does not export alloc \(function\), validate \(function\)$/,
    );
    expect(requests).toBe(0);
    await client.close();
    expect((await run(SVC_BIN, ['daemon', 'down'], stack.cli)).code).toBe(0);
  });

  it('lists the tools while svcd is not running, and answers a call with a tool error saying so', async () => {
    // A node home where no svcd has ever run.
    const idle = await connect({ ...stack.env, SVC_HOME: join(stack.tmp.dir, 'no-svcd') });
    try {
      const { tools } = await idle.listTools();
      expect(tools.map((t) => t.name).sort()).toEqual(Object.keys(MCP_TOOLS).sort());
      const r = (await idle.callTool({
        name: 'get_mesh_task',
        arguments: { task_id: 'mt_x' },
      })) as unknown as ToolResult;
      expect(r.isError).toBe(true);
      expect(r._meta).toEqual({ code: 'unavailable' });
      expect(r.content[0]?.text).toMatch(
        /^unavailable: svcd is not running \(cannot connect to .*mgmt\.sock: ENOENT\); start it with "svc daemon up"$/,
      );
    } finally {
      await idle.close();
    }
  });
});
