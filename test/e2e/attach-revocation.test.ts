// An open attach stream ends when either credential behind it ends: the operator's (a revoked
// token) or the node's (re-registered with --force, the documented answer to a leaked node
// JWT). Real tower, svcd and a PTY agent; the viewer is told why before its socket closes.
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { mgmtCall } from '../../src/cli/mgmt-client.js';
import { type NodeStack, startNodeStack } from '../support/node-stack.js';
import { waitFor } from '../support/poll.js';
import { run, SVC_BIN, SVCD_BIN } from '../support/procs.js';

let stack: NodeStack;
let agentId: string;

beforeAll(async () => {
  stack = await startNodeStack({
    name: 'attach-revoke',
    hostname: 'attach-revoke-node',
    svcd: { args: ['--log-level', 'warn'] },
    beforeSvcd: async (s) => {
      const { domainId } = await s.mission('attach-revoke', 'm');
      agentId = await s.enrol(domainId, 'tty');
      writeFileSync(
        join(s.home, 'svcd', 'agents.toml'),
        `[[agent]]\nid = "${agentId}"\nruntime = "alpha_code"\nsupervise = true\npty = true\ncommand = ["node", ${JSON.stringify(SVCD_BIN)}, "reference-agent", "--interactive"]\n`,
      );
    },
  });
  await waitFor(
    'the PTY agent running',
    async () => {
      const r = await run(SVC_BIN, ['--json', 'agent', 'supervise', 'list'], stack.cli);
      return (
        r.code === 0 &&
        (JSON.parse(r.stdout) as { items: { id: string; state: string }[] }).items.some(
          (a) => a.id === agentId && a.state === 'running',
        )
      );
    },
    { timeoutMs: 90_000 },
  );
});
afterAll(async () => {
  await stack?.stop();
});

interface Viewer {
  /** Text frames (JSON) received, in order. */
  frames: { type: string; code?: string }[];
  /** Bytes of terminal output received so far. */
  bytes: () => number;
  closed: Promise<{ code: number; reason: string }>;
}

/** Attaches to the PTY agent through the tower with `token` and waits for terminal output. */
async function attach(token: string): Promise<Viewer> {
  const q = new URLSearchParams({ node: stack.node.node_id, agent: agentId });
  const ws = new WebSocket(`${stack.tower.url.replace(/^http/, 'ws')}/api/attach-ws?${q}`, {
    headers: { authorization: `Bearer ${token}` },
  });
  const frames: Viewer['frames'] = [];
  let bytes = 0;
  ws.on('message', (d, isBinary) => {
    if (isBinary) bytes += (d as Buffer).length;
    else frames.push(JSON.parse(String(d)) as Viewer['frames'][number]);
  });
  ws.on('error', () => {});
  const closed = new Promise<{ code: number; reason: string }>((resolve) =>
    ws.on('close', (code, reason) => resolve({ code, reason: reason.toString() })),
  );
  await new Promise<void>((resolve, reject) => {
    ws.once('open', () => resolve());
    ws.once('unexpected-response', (_req, res) => reject(new Error(`upgrade refused: ${res.statusCode}`)));
  });
  // The stream is piped once the node dialled back: its screen arrives first.
  await waitFor('terminal output', () => bytes > 0);
  return { frames, bytes: () => bytes, closed };
}

describe('an attach stream ends with the credentials behind it', () => {
  it("closes the viewer's stream when the viewer's token is revoked, saying so", async () => {
    const res = await stack.admin('POST', '/tokens', { name: 'viewer', scopes: ['admin'] });
    const token = (await res.json()) as { id: string; token: string };
    const viewer = await attach(token.token);
    expect((await stack.admin('DELETE', `/tokens/${token.id}`)).status).toBe(200);
    const c = await viewer.closed;
    expect(viewer.frames.at(-1)?.code).toBe('unauthenticated');
    expect(c.code).not.toBe(1000);
  });

  it("closes the stream when the node's credential is rotated under it; after svcd restarts, attach works", async () => {
    const viewer = await attach(stack.adminToken);
    await stack.svc(['agent', 'node', 'register', '--hostname', 'attach-revoke-node', '--force']);
    const c = await viewer.closed;
    expect(viewer.frames.at(-1)?.code).toBe('unavailable');
    expect(c.code).not.toBe(1000);
    // svcd, holding the old JWT, is refused; restarted, it reads the new one from node.json
    // (docs/operator-guide.md), and attach works again.
    const svcd = stack.svcd;
    svcd?.kill('SIGTERM');
    await svcd?.exited;
    await stack.startSvcd(['--log-level', 'warn']);
    await waitFor(
      'svcd connected',
      async () =>
        (await mgmtCall<{ tower: { connected: boolean } }>(stack.mgmtSock, 'daemon.status')).tower.connected,
    );
    const again = await attach(stack.adminToken);
    expect(again.bytes()).toBeGreaterThan(0);
  });
});
