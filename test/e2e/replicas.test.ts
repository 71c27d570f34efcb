// Two tower replicas on one PostgreSQL schema behind a real HAProxy, a real svcd connected
// through it with a reference agent in a PTY: every replica says the node is online, and the
// one that does not hold its control channel answers its status, restarts its agent and
// carries a terminal to it (Bearer and browser ticket, the ticket bought on the other
// replica). Then the replica holding the channel is killed with -9 in the middle of an attach:
// the viewer's stream ends, svcd reconnects through HAProxy to the survivor, presence
// converges there, and the next attach works.
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mgmtCall } from '../../src/cli/mgmt-client.js';
import { haproxyInstalled } from '../support/haproxy.js';
import { attachViewer } from '../support/node-channel.js';
import { svcdConnected } from '../support/node-stack.js';
import { waitFor } from '../support/poll.js';
import { isolatedEnv, type Proc, run, SVC_BIN, SVCD_BIN, spawnProc, stopAll } from '../support/procs.js';
import { type Replicas, startReplicas } from '../support/replicas.js';

let r: Replicas;
let env: NodeJS.ProcessEnv;
let svcd: Proc;
let nodeId: string;
let agentId: string;

const api = (base: string, method: string, path: string, body?: unknown) => r.call(base, method, path, body);
/** The index of the replica holding the node's channel, from the shared presence table. */
const holderIndex = () => r.holderOf(nodeId);

const attachUrl = (base: string, q: Record<string, string>) =>
  `${base.replace(/^http/, 'ws')}/api/attach-ws?${new URLSearchParams(q)}`;

/** Opens a terminal on the agent through `base` and checks that typed text comes back. */
async function attachAndEcho(base: string, text: string, q: Record<string, string> = {}) {
  const v = await attachViewer(
    attachUrl(base, { node: nodeId, agent: agentId, cols: '80', rows: '24', ...q }),
    q.token ? { origin: base } : { authorization: `Bearer ${r.admin}` },
  );
  v.ws.send(Buffer.from(`${text}\r`));
  await waitFor(`the echo of "${text}"`, () => v.out().includes(`echo: ${text}`) || v.frames.length > 0);
  expect(v.frames).toEqual([]);
  return v;
}

beforeAll(async () => {
  r = await startReplicas({ n: 2, args: ['--rate-limit', '0'], checkIntervalMs: 200 });
  const dir = join(r.dir, 'node');
  env = isolatedEnv(dir);
  for (const d of [env.SVC_HOME as string, env.HOME as string, join(env.SVC_HOME as string, 'svcd')])
    mkdirSync(d, { recursive: true, mode: 0o700 });
  const cli = { ...env, SVC_BASE_URL: r.lb.url, SVC_TOKEN: r.admin };
  const reg = await run(SVC_BIN, ['--json', 'agent', 'node', 'register', '--hostname', 'replicated'], cli);
  expect(reg.code).toBe(0);
  const node = JSON.parse(readFileSync(env.SVC_NODE_FILE as string, 'utf8')) as {
    node_id: string;
    jwt: string;
  };
  nodeId = node.node_id;
  const domain = await api(r.lb.url, 'POST', '/domains', { name: 'replicated' });
  const enrolled = await fetch(`${r.lb.url}/agents`, {
    method: 'POST',
    headers: { authorization: `Bearer ${node.jwt}`, 'content-type': 'application/json' },
    body: JSON.stringify({ domain_id: domain.body.id, runtime: 'alpha_code', name: 'tty' }),
  });
  expect(enrolled.status).toBe(201);
  agentId = ((await enrolled.json()) as { id: string }).id;
  writeFileSync(
    join(env.SVC_HOME as string, 'svcd', 'agents.toml'),
    `[[agent]]\nid = "${agentId}"\nruntime = "alpha_code"\nsupervise = true\npty = true\ncommand = ["node", ${JSON.stringify(SVCD_BIN)}, "reference-agent", "--interactive"]\n`,
  );
  svcd = spawnProc(SVCD_BIN, ['run', '--backend-url', r.lb.url, '--log-level', 'warn'], env);
  const mgmtSock = join(env.SVC_HOME as string, 'svcd', 'mgmt.sock');
  await svcdConnected(svcd, mgmtSock, 'svcd connected through HAProxy');
  await waitFor('the agent running', async () => {
    const list = await mgmtCall<{ items: { id: string; state: string }[] }>(mgmtSock, 'agent.list');
    return list.items.some((a) => a.id === agentId && a.state === 'running');
  });
}, 300_000);

afterAll(async () => {
  await stopAll();
  await r?.stop();
});

describe.skipIf(!haproxyInstalled())('a node behind HAProxy, asked through either replica', () => {
  it('is online on every replica, and the one without its channel answers status and restarts its agent', async () => {
    const holder = await waitFor('presence in the store', holderIndex);
    const other = r.towers[1 - holder]?.url as string;
    for (const t of r.towers) {
      expect((await api(t.url, 'GET', `/nodes/${nodeId}`)).body.online).toBe(true);
    }
    const status = await api(other, 'GET', `/nodes/${nodeId}/status`);
    expect(status.status).toBe(200);
    expect(status.body.node_id).toBe(nodeId);
    expect((status.body.agents as { id: string }[]).map((a) => a.id)).toContain(agentId);
    const restart = await api(other, 'POST', `/nodes/${nodeId}/agents/${agentId}/actions`, {
      action: 'restart',
    });
    expect(restart.status).toBe(200);
    // Errors of the node come back through the hop with their codes too.
    const missing = await api(other, 'POST', `/nodes/${nodeId}/agents/no-such-agent/actions`, {
      action: 'restart',
    });
    expect([missing.status, missing.body.code]).toEqual([404, 'agent_not_found']);
  });

  it('carries a terminal to the node through the other replica, with Bearer and with a ticket bought elsewhere', async () => {
    const holder = (await holderIndex()) as number;
    const other = r.towers[1 - holder]?.url as string;
    const holderUrl = r.towers[holder]?.url as string;
    await waitFor('the restarted agent to echo', async () => {
      const v = await attachAndEcho(other, 'after restart').catch(() => null);
      v?.ws.close();
      return v !== null;
    });
    const bearer = await attachAndEcho(other, 'cross bearer');
    bearer.ws.close();
    // A ticket bought on the holder, used on the other replica: handed back to its issuer.
    const t = await api(holderUrl, 'POST', '/api/attach-tickets', { node: nodeId, agent: agentId });
    expect(t.status).toBe(201);
    const viaTicket = await attachAndEcho(other, 'cross ticket', { token: t.body.ticket as string });
    viaTicket.ws.close();
    // And through the balancer, wherever it lands, several times.
    for (let i = 0; i < 4; i++) (await attachAndEcho(r.lb.url, `through lb ${i}`)).ws.close();
  });

  it('after the holding replica is killed mid-attach, reconnects to the survivor and attaches again', async () => {
    const holder = (await holderIndex()) as number;
    const survivor = r.towers[1 - holder]?.url as string;
    const open = await attachAndEcho(survivor, 'before the kill');
    const victim = r.towers[holder] as Proc;
    victim.kill('SIGKILL');
    await victim.exited;
    // The stream went through the dead replica: it ends rather than hangs.
    await open.closed;
    await waitFor('presence to converge on the survivor', async () => (await holderIndex()) === 1 - holder, {
      timeoutMs: 120_000,
    });
    expect((await api(survivor, 'GET', `/nodes/${nodeId}`)).body.online).toBe(true);
    const again = await attachAndEcho(r.lb.url, 'after the kill');
    again.ws.close();
    const status = await api(r.lb.url, 'GET', `/nodes/${nodeId}/status`);
    expect(status.status).toBe(200);
  });
});
