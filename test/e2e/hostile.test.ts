// The six holes of issue 27, each replayed as its reproduction against real processes (a
// tower, a registered node and its svcd): a null frame on /nodes/connect and on mgmt.sock; a
// domain-restricted admin trying to become a global one; a rotated node credential and a
// retired signing key keeping open channels; the data directory's files readable by others; a
// node reporting on another node's lease; and unauthenticated requests never rate-limited.
import { chmodSync, mkdirSync, statSync } from 'node:fs';
import { createConnection } from 'node:net';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { mgmtCall } from '../../src/cli/mgmt-client.js';
import { CONTROL_PATH } from '../../src/protocol/control.js';
import { type NodeStack, startNodeStack } from '../support/node-stack.js';
import { waitFor } from '../support/poll.js';
import { run, SVC_BIN, SVCD_BIN, startTowerProc } from '../support/procs.js';

let stack: NodeStack;
let url: string;
const AUTH_FAILURE_LIMIT = 20;

beforeAll(async () => {
  stack = await startNodeStack({
    name: 'hostile',
    hostname: 'hostile-node',
    towerArgs: ['--auth-failure-limit', `${AUTH_FAILURE_LIMIT}/1m`],
    svcd: { args: ['--log-level', 'warn'] },
  });
  url = stack.tower.url;
});
afterAll(async () => {
  await stack?.stop();
});

const api = async (method: string, path: string, token: string | null, body?: unknown) => {
  const res = await fetch(url + path, {
    method,
    headers: {
      ...(token ? { authorization: `Bearer ${token}` } : {}),
      ...(body !== undefined ? { 'content-type': 'application/json' } : {}),
    },
    ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
  });
  const text = await res.text();
  return {
    status: res.status,
    headers: res.headers,
    body: (text ? JSON.parse(text) : {}) as Record<string, unknown>,
  };
};
const admin = (method: string, path: string, body?: unknown) => api(method, path, stack.adminToken, body);

interface Channel {
  ws: WebSocket;
  /** Resolves with the close code and reason, and when (Date.now()) it came. */
  closed: Promise<{ code: number; reason: string; at: number }>;
  messages: unknown[];
}

/** Opens a WebSocket to the tower with a credential and waits until it is open. */
async function openWs(path: string, token: string): Promise<Channel> {
  const ws = new WebSocket(url.replace(/^http/, 'ws') + path, {
    headers: { authorization: `Bearer ${token}` },
  });
  const messages: unknown[] = [];
  ws.on('message', (d, isBinary) => {
    if (!isBinary) messages.push(JSON.parse(String(d)));
  });
  const closed = new Promise<{ code: number; reason: string; at: number }>((resolve) =>
    ws.on('close', (code, reason) => resolve({ code, reason: reason.toString(), at: Date.now() })),
  );
  ws.on('error', () => {});
  await new Promise<void>((resolve, reject) => {
    ws.once('open', () => resolve());
    ws.once('unexpected-response', (_req, res) => reject(new Error(`upgrade refused: ${res.statusCode}`)));
  });
  return { ws, closed, messages };
}

/** A control channel that said hello and was welcomed. */
async function welcomed(token: string): Promise<Channel> {
  const c = await openWs(CONTROL_PATH, token);
  c.ws.send(JSON.stringify({ type: 'hello', version: 'e2e', attach_secret: 'x'.repeat(64), agents: [] }));
  await waitFor('welcome', () => c.messages.some((m) => (m as { type: string }).type === 'welcome'));
  return c;
}

/** One line to mgmt.sock, the replies until it closes. */
function mgmtLine(line: string): Promise<{ replies: { error?: { code: number } }[]; closed: boolean }> {
  return new Promise((resolve, reject) => {
    const s = createConnection(stack.mgmtSock);
    let buf = '';
    s.setEncoding('utf8');
    s.on('data', (d: string) => {
      buf += d;
    });
    s.on('error', reject);
    s.on('close', () =>
      resolve({
        replies: buf
          .split('\n')
          .filter((l) => l !== '')
          .map((l) => JSON.parse(l) as { error?: { code: number } }),
        closed: true,
      }),
    );
    s.on('connect', () => s.write(`${line}\n`));
  });
}

describe('1. a frame that does not decode closes its connection, never the process', () => {
  it('closes a control channel sent null (and [] 1 "s" {} a bare hello, binary) with 1008; the tower answers on', async () => {
    for (const frame of ['null', '[]', '1', '"s"', '{}', '{"type":"hello"}', 'not json']) {
      const c = await openWs(CONTROL_PATH, stack.node.jwt);
      c.ws.send(frame);
      expect((await c.closed).code).toBe(1008);
    }
    const bin = await openWs(CONTROL_PATH, stack.node.jwt);
    bin.ws.send(Buffer.from([0, 1, 2]));
    expect((await bin.closed).code).toBe(1008);
    expect((await api('GET', '/healthz', null)).status).toBe(200);
    expect(stack.tower.child.exitCode).toBeNull();
    // svcd's own channel was never touched: the node is still online.
    const node = await admin('GET', `/nodes/${stack.node.node_id}`);
    expect(node.body.online).toBe(true);
  });

  it('answers the mgmt.sock line null with -32600 and closes that connection; svcd answers on', async () => {
    for (const line of ['null', '[]', '1', '{"jsonrpc":"2.0"}']) {
      const r = await mgmtLine(line);
      expect(r.replies.map((x) => x.error?.code)).toEqual([-32600]);
    }
    expect((await mgmtLine('{')).replies.map((x) => x.error?.code)).toEqual([-32700]);
    const status = await mgmtCall<{ node_id: string }>(stack.mgmtSock, 'daemon.status');
    expect(status.node_id).toBe(stack.node.node_id);
  });
});

describe('2. a domain-restricted admin stays within its domains', () => {
  it('cannot mint a wider token, read the master key, or administer the tower', async () => {
    const d1 = (await admin('POST', '/domains', { name: 'D1' })).body.id as string;
    const restricted = (
      await admin('POST', '/tokens', { name: 'd1-admin', scopes: ['admin'], domains: [d1] })
    ).body as { token: string };
    const r = restricted.token;
    const wider = await api('POST', '/tokens', r, { name: 'escalate', scopes: ['admin'] });
    expect([wider.status, wider.body.code]).toEqual([403, 'forbidden']);
    const within = await api('POST', '/tokens', r, { name: 'ok', scopes: ['feed:read'], domains: [d1] });
    expect(within.status).toBe(201);
    expect(within.body.domains).toEqual([d1]);
    expect((await api('GET', '/admin/master-key', r)).status).toBe(403);
    expect((await api('POST', '/admin/signing-keys/rotate', r)).status).toBe(403);
    expect((await api('POST', '/domains', r, { name: 'mine' })).status).toBe(403);
    const all = (await admin('GET', '/tokens')).body.items as { id: string; domains: string[] | null }[];
    const bootstrap = all.find((t) => t.domains === null) as { id: string };
    expect((await api('DELETE', `/tokens/${bootstrap.id}`, r)).status).toBe(404);
    const seen = (await api('GET', '/tokens', r)).body.items as { domains: string[] | null }[];
    expect(seen.length).toBeGreaterThan(0);
    for (const t of seen) expect(t.domains).toEqual([d1]);
    // The bootstrap admin still works.
    expect((await admin('GET', '/tokens')).status).toBe(200);
  });
});

describe('5. a lease belongs to the node of the agent that claimed it', () => {
  it("refuses another node's heartbeat, progress and completion with the lease id, changing nothing", async () => {
    const owner = (await admin('POST', '/nodes', { hostname: 'lease-owner' })).body as { jwt: string };
    const thief = (await admin('POST', '/nodes', { hostname: 'lease-thief' })).body as { jwt: string };
    const domainId = (await admin('POST', '/domains', { name: 'leases' })).body.id as string;
    const missionId = (await admin('POST', `/domains/${domainId}/m`, { name: 'm' })).body.id as string;
    const agentId = (await api('POST', '/agents', owner.jwt, { domain_id: domainId, runtime: 'beta_cli' }))
      .body.id as string;
    const taskId = (await admin('POST', `/work/missions/${missionId}/tasks`, { title: 't' })).body
      .id as string;
    const mcp = (jwt: string, tool: string, args: Record<string, unknown>) =>
      api('POST', '/mcp/call', jwt, { tool, args });
    const claim = (await mcp(owner.jwt, 'claim_mesh_task', { agent_id: agentId, mission_id: missionId })).body
      .result as { lease_id: string };
    const lease = { task_id: taskId, lease_id: claim.lease_id };
    const answers = [
      await mcp(thief.jwt, 'heartbeat_mesh_task', lease),
      await mcp(thief.jwt, 'report_progress', { ...lease, message: 'mine now' }),
      await mcp(thief.jwt, 'complete_mesh_task', { ...lease, result: { stolen: true } }),
    ];
    expect(answers.map((a) => a.status)).toEqual([403, 403, 403]);
    const task = (await admin('GET', `/work/tasks/${taskId}`)).body;
    expect(task).toMatchObject({ state: 'claimed', claimed_by: agentId, result: null });
    const done = await mcp(owner.jwt, 'complete_mesh_task', { ...lease, result: { ok: true } });
    expect(done.body.result).toMatchObject({ state: 'completed', result: { ok: true } });
  });
});

describe('3. a rotated or retired node credential loses its open channels', () => {
  it('closes the control channel and feed stream of a node re-registered with --force', async () => {
    // svcd's own channel (one per node: a second one would replace it) and a feed stream.
    const oldJwt = stack.node.jwt;
    const feed = await openWs('/events/ws', oldJwt);
    const connected = async () =>
      (await mgmtCall<{ tower: { connected: boolean } }>(stack.mgmtSock, 'daemon.status')).tower.connected;
    await waitFor('svcd connected', connected);
    await stack.svc(['agent', 'node', 'register', '--hostname', 'hostile-node', '--force']);
    const rotatedAt = Date.now();
    const f = await feed.closed;
    expect(f.code).toBe(1008);
    expect(f.reason).toMatch(/rotated/);
    // svcd, still holding the old JWT, is off the tower too, and the tower no longer reaches it.
    await waitFor('svcd to lose its channel', async () => !(await connected()), { intervalMs: 10 });
    const offAt = Date.now();
    const status = await admin('GET', `/nodes/${stack.node.node_id}/status`);
    expect(status.body.code).toBe('node_offline');
    // Measured, not asserted (no timing thresholds in tests): the bound is the re-check period.
    console.info(
      `after the re-registration: feed stream closed in ${f.at - rotatedAt} ms, svcd saw its channel closed within ${offAt - rotatedAt} ms`,
    );
  });

  it('closes the control channel of a node whose signing key is retired', async () => {
    const node = (await admin('POST', '/nodes', { hostname: 'old-key-node' })).body as { jwt: string };
    const channel = await welcomed(node.jwt);
    const feed = await openWs('/events/ws', node.jwt);
    const oldKid = (
      (await admin('GET', '/admin/signing-keys')).body.items as { kid: string; active: boolean }[]
    )
      .filter((k) => k.active)
      .map((k) => k.kid)[0] as string;
    expect((await admin('POST', '/admin/signing-keys/rotate')).status).toBe(201);
    expect((await admin('POST', `/admin/signing-keys/${oldKid}/retire`)).status).toBe(200);
    const retiredAt = Date.now();
    const [c, f] = await Promise.all([channel.closed, feed.closed]);
    expect([c.code, f.code]).toEqual([1008, 1008]);
    console.info(`control channel closed ${c.at - retiredAt} ms after the key was retired`);
    expect((await api('GET', '/nodes', node.jwt)).status).toBe(401);
  });
});

describe('4. files are private whatever the umask and the directory', () => {
  it('makes tower.db and its -wal and -shm 0600 in an existing 0755 directory, and refuses 0644', async () => {
    const dataDir = join(stack.tmp.dir, 'existing-data');
    mkdirSync(dataDir, { recursive: true });
    chmodSync(dataDir, 0o755);
    const tower = await startTowerProc(stack.env, ['--data-dir', dataDir]);
    // Migrations and the bootstrap token were written: the -wal and -shm exist while it runs.
    const mode = (f: string) => statSync(join(dataDir, f)).mode & 0o777;
    await waitFor('the WAL files', () =>
      ['tower.db-wal', 'tower.db-shm'].every((f) => statSync(join(dataDir, f), { throwIfNoEntry: false })),
    );
    expect(statSync(dataDir).mode & 0o777).toBe(0o700);
    expect(['tower.db', 'tower.db-wal', 'tower.db-shm', 'admin.token'].map(mode)).toEqual([
      0o600, 0o600, 0o600, 0o600,
    ]);
    tower.kill('SIGTERM');
    await tower.exited;

    chmodSync(join(dataDir, 'tower.db'), 0o644);
    const again = await run(
      SVC_BIN,
      ['tower', 'serve', '--listen', '127.0.0.1:0', '--data-dir', dataDir],
      stack.env,
    );
    expect(again.code).not.toBe(0);
    expect(again.stderr).toContain(`chmod 600 ${join(dataDir, 'tower.db')}`);

    // The admin token is held to the same rule.
    chmodSync(join(dataDir, 'tower.db'), 0o600);
    chmodSync(join(dataDir, 'admin.token'), 0o644);
    const token = await run(
      SVC_BIN,
      ['tower', 'serve', '--listen', '127.0.0.1:0', '--data-dir', dataDir],
      stack.env,
    );
    expect(token.code).not.toBe(0);
    expect(token.stderr).toContain(`chmod 600 ${join(dataDir, 'admin.token')}`);
  });

  it("keeps svcd's state.db 0600, and svcd refuses a node identity file others can read", async () => {
    const state = join(stack.home, 'svcd', 'state.db');
    expect(statSync(state).mode & 0o777).toBe(0o600);
    const nodeFile = stack.env.SVC_NODE_FILE as string;
    chmodSync(nodeFile, 0o644);
    try {
      const r = await run(SVCD_BIN, ['run', '--backend-url', url], stack.env);
      expect(r.code).not.toBe(0);
      expect(r.stderr).toContain(`chmod 600 ${nodeFile}`);
    } finally {
      chmodSync(nodeFile, 0o600);
    }
  });
});

describe('6. failed authentications are limited per client address', () => {
  it('answers 429 with Retry-After once an address has failed the limit, before authenticating', async () => {
    const statuses: number[] = [];
    for (let i = 0; i < AUTH_FAILURE_LIMIT; i++)
      statuses.push((await api('GET', '/tokens', `svc_guess_${i}`)).status);
    // Other requests of this file may have failed already: every guess is 401 until the limit, then 429.
    expect(statuses.every((s) => s === 401 || s === 429)).toBe(true);
    const limited = await api('GET', '/tokens', 'svc_guess_last');
    expect(limited.status).toBe(429);
    expect(limited.body.code).toBe('rate_limited');
    expect(Number(limited.headers.get('retry-after'))).toBeGreaterThan(0);
    // A credential the tower already knows still passes.
    expect((await admin('GET', '/tokens')).status).toBe(200);
  });
});
