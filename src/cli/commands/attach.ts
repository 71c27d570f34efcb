// `svc attach [<agent_id>] [--node N] [--read-only]`: the terminal of a PTY or mux_hosted agent. Local agents
// go through svcd.sock; others through the tower's /api/attach-ws (docs/attach.md).
import { createInterface } from 'node:readline/promises';
import type { Command } from 'commander';
import WebSocket from 'ws';
import { daemonPaths } from '../../daemon/paths.js';
import { ATTACH_WS_PATH, type AttachListResult, LOCAL_ATTACH_PATH } from '../../protocol/attach.js';
import { SvcError } from '../../protocol/errors.js';
import { DETACH_HINT } from '../attach/detach-key.js';
import {
  type AttachOutcome,
  type AttachTty,
  opened,
  processTty,
  runAttach,
  terminalSize,
} from '../attach/terminal-client.js';
import { seg } from '../client.js';
import { type CommandDeps, globals } from '../deps.js';
import { mgmtCall } from '../mgmt-client.js';
import { print, table } from '../output.js';
import { ExitStatus, UsageError } from '../run.js';

interface AttachFlags {
  node?: string;
  readOnly?: boolean;
}

export function registerAttach(program: Command, deps: CommandDeps, tty: () => AttachTty = processTty): void {
  program
    .command('attach')
    .description(`attach to the terminal of a PTY or mux_hosted agent (detach: ${DETACH_HINT})`)
    .argument('[agent_id]', 'the agent (default: pick from the attachable agents of this node)')
    .option('--node <node_id>', 'the node the agent runs on (default: this node, else the tower says)')
    .option('--read-only', 'watch without typing')
    .action(async (agentArg: string | undefined, o: AttachFlags, cmd: Command) => {
      const json = Boolean(globals(cmd).json);
      const paths = daemonPaths(deps.io.paths.home);
      const local = await localAgents(paths.mgmtSock);
      let agentId = agentArg;
      if (!agentId) {
        if (!local) throw new UsageError('svcd is not running here: give the agent id and --node');
        agentId = await pick(deps, local, json);
        if (!agentId) return;
      }
      const t = tty();
      const size = terminalSize(t);
      const query = new URLSearchParams({
        agent: agentId,
        cols: String(size.cols),
        rows: String(size.rows),
        ...(o.readOnly ? { read_only: '1' } : {}),
      });
      const here = local && (!o.node || o.node === local.nodeId) ? local : null;
      const isLocal = here?.items.some((a) => a.agent_id === agentId) ?? false;
      let ws: WebSocket;
      let where: string;
      if (isLocal) {
        where = `svcd (${paths.svcdSock})`;
        ws = new WebSocket(`ws+unix://${paths.svcdSock}:${LOCAL_ATTACH_PATH}?${query}`);
      } else {
        const client = await deps.client(cmd);
        const node = o.node ?? (await client.get<{ node_id: string }>(`/agents/${seg(agentId)}`)).node_id;
        query.set('node', node);
        where = `the tower (${client.url})`;
        ws = new WebSocket(`${client.url.replace(/^http/, 'ws')}${ATTACH_WS_PATH}?${query}`, {
          headers: client.token ? { authorization: `Bearer ${client.token}` } : {},
        });
      }
      await opened(ws, where);
      deps.io.err(
        `[attached to ${agentId} via ${isLocal ? 'svcd.sock' : 'the tower'}; detach: ${DETACH_HINT}]`,
      );
      const outcome: AttachOutcome = await runAttach(ws, t, { readOnly: Boolean(o.readOnly) });
      // The agent may have left attributes on; give the shell a sane terminal back.
      if (t.stdout.isTTY) t.stdout.write('\x1b[0m\x1b[?25h');
      switch (outcome.how) {
        case 'detached':
          deps.io.err(`\r\n[detached from ${agentId}]`);
          return;
        case 'exit':
          deps.io.err(
            `\r\n[${agentId} exited${outcome.code !== null ? ` with code ${outcome.code}` : ''}${outcome.signal ? ` (${outcome.signal})` : ''}]`,
          );
          return;
        case 'closed':
          deps.io.err(`\r\n[connection closed: ${outcome.reason}]`);
          throw new ExitStatus(1);
      }
    });
}

async function localAgents(mgmtSock: string): Promise<(AttachListResult & { nodeId: string }) | null> {
  try {
    const status = await mgmtCall<{ node_id: string }>(mgmtSock, 'daemon.status');
    const list = await mgmtCall<AttachListResult>(mgmtSock, 'attach.list');
    return { ...list, nodeId: status.node_id };
  } catch (e) {
    if (e instanceof SvcError && e.code === 'unavailable') return null;
    throw e;
  }
}

/** Without an agent id: list the attachable agents and, on a terminal, ask which one. */
async function pick(deps: CommandDeps, local: AttachListResult, json: boolean): Promise<string | undefined> {
  const rows = local.items.map((a, i) => ({ n: i + 1, ...a }));
  if (json || !deps.io.stdinIsTTY?.() || rows.length === 0) {
    print(deps.io, json, local, () =>
      rows.length === 0
        ? 'no attachable agents on this node (pty = true in agents.toml, or runtime mux_hosted)'
        : table(rows, [
            { header: '#', get: (r) => r.n },
            { header: 'agent', get: (r) => r.agent_id },
            { header: 'size', get: (r) => `${r.cols}x${r.rows}` },
            { header: 'viewers', get: (r) => r.viewers.length },
          ]),
    );
    return undefined;
  }
  deps.io.out(
    rows.map((r) => `${r.n}) ${r.agent_id}  ${r.cols}x${r.rows}  viewers: ${r.viewers.length}`).join('\n'),
  );
  const rl = createInterface({ input: process.stdin, output: process.stderr });
  try {
    const answer = (await rl.question(`attach to [1-${rows.length}]: `)).trim();
    const r = rows.find((x) => String(x.n) === answer || x.agent_id === answer);
    if (!r) throw new UsageError(`no choice "${answer}"`);
    return r.agent_id;
  } finally {
    rl.close();
  }
}
