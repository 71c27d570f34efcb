// The whole secrets path with real processes: a tower, a registered node, an enrolled agent
// that svcd starts from agents.toml. The agent reads a granted secret with `svcd get-secret`
// and with a raw socket client; un-granted, forged, revoked and exited-agent requests are
// refused with their codes; afterwards the value is nowhere on disk, in logs or in svcd's
// environment.
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { createConnection } from 'node:net';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { BrokerReply } from '../../src/protocol/secrets-socket.js';
import { type NodeStack, startNodeStack } from '../support/node-stack.js';
import { waitFor } from '../support/poll.js';
import { type Proc, SVCD_BIN } from '../support/procs.js';
import { captureFeed, type FeedCapture } from './feed-capture.js';

const VALUE = 'agent-e2e-secret-value-5b7d9f1a3c';
const OTHER = 'agent-e2e-other-value-2e4a6c8e0f';
const sha = (s: string) => createHash('sha256').update(s).digest('hex');

// The raw client an agent might write: one request, one reply, the value hashed before output.
const RAW_CLIENT = `
const net = require('node:net');
const crypto = require('node:crypto');
const s = net.createConnection(process.env.SVC_SECRETS_SOCKET);
let text = '';
s.on('data', (d) => { text += d; });
s.on('close', () => {
  const r = JSON.parse(text);
  process.stdout.write(r.ok ? crypto.createHash('sha256').update(r.value).digest('hex') : r.error.code);
});
s.on('connect', () => s.end(JSON.stringify({ op: 'get', session: process.env.SVC_SECRETS_SESSION, name: process.argv[2] }) + '\\n'));
`;

function listFiles(dir: string): string[] {
  const out: string[] = [];
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = join(dir, e.name);
    if (e.isDirectory()) out.push(...listFiles(p));
    else if (e.isFile()) out.push(p);
  }
  return out;
}

function ask(path: string, session: string, name: string): Promise<BrokerReply> {
  return new Promise((resolve, reject) => {
    const s = createConnection(path);
    let text = '';
    s.setEncoding('utf8');
    s.on('data', (d: string) => {
      text += d;
    });
    s.on('error', reject);
    s.on('close', () => resolve(JSON.parse(text) as BrokerReply));
    s.on('connect', () => s.end(`${JSON.stringify({ op: 'get', session, name })}\n`));
  });
}

const codeOf = (r: BrokerReply) => (r.ok ? 'ok' : r.error.code);

describe('an agent started by svcd reads its secrets', () => {
  let stack: NodeStack;
  let home: string;
  let out: string;
  let agentId: string;
  let domainId: string;
  let feed: FeedCapture;

  const svc = (args: string[], input?: string) => stack.svc(args, input);

  beforeAll(async () => {
    stack = await startNodeStack({
      name: 'sa',
      hostname: 'e2e-node',
      svcd: { args: ['--log-level', 'debug'] },
      beforeSvcd: async (s) => {
        home = s.home;
        out = join(s.tmp.dir, 'out');
        mkdirSync(out, { recursive: true, mode: 0o700 });
        feed = captureFeed(s.tower.url, s.adminToken);
        domainId = (JSON.parse(await s.svc(['--json', 'domain', 'create', 'ops'])) as { id: string }).id;
        agentId = await s.enrol(domainId, 'reader');

        await s.svc(['secret', 'set', 'DEPLOY_KEY', '--domain', domainId], `${VALUE}\n`);
        await s.svc(['secret', 'set', 'OTHER_KEY', '--domain', domainId], OTHER);
        await s.svc(['secret', 'grant', 'DEPLOY_KEY', '--domain', domainId, '--agent', agentId]);

        writeFileSync(join(s.tmp.dir, 'raw.cjs'), RAW_CLIENT);
        const script = [
          `node ${SVCD_BIN} get-secret DEPLOY_KEY --raw | sha256sum | cut -d' ' -f1 > "$OUT/cli.sha"`,
          `node "$OUT/../raw.cjs" DEPLOY_KEY > "$OUT/raw.sha"`,
          `node ${SVCD_BIN} get-secret OTHER_KEY > "$OUT/other.out" 2> "$OUT/other.err"; echo $? > "$OUT/other.code"`,
          `printf %s "$SVC_SECRETS_SESSION" > "$OUT/session.tmp" && mv "$OUT/session.tmp" "$OUT/session"`,
          'exec sleep 600',
        ].join('\n');
        writeFileSync(
          join(home, 'svcd', 'agents.toml'),
          `[[agent]]\nid = "${agentId}"\nruntime = "alpha_code"\nsupervise = true\ncommand = ["sh", "-c", ${JSON.stringify(script)}]\nenv = { OUT = "${out}" }\n`,
        );
      },
    });
    await waitFor('the agent to have read its secrets', () => existsSync(join(out, 'session')), {
      timeoutMs: 90_000,
    });
  });
  afterAll(async () => {
    await feed?.stop();
    await stack?.stop();
  });

  it('keeps a control channel to the tower (daemon status, node online)', async () => {
    await waitFor('the control channel', async () => {
      const st = JSON.parse(await svc(['--json', 'daemon', 'status'])) as { tower: { connected: boolean } };
      return st.tower.connected;
    });
    const admin = readFileSync(join(home, 'tower', 'admin.token'), 'utf8').trim();
    const res = await fetch(`${stack.tower.url}/nodes`, { headers: { authorization: `Bearer ${admin}` } });
    const nodes = (await res.json()) as { items: { online: boolean }[] };
    expect(nodes.items.some((n) => n.online)).toBe(true);
  });

  it('reads a granted secret through svcd get-secret and through a raw socket client', () => {
    expect(readFileSync(join(out, 'cli.sha'), 'utf8').trim()).toBe(sha(VALUE));
    expect(readFileSync(join(out, 'raw.sha'), 'utf8')).toBe(sha(VALUE));
  });

  it('is refused a secret that is not granted to it', () => {
    expect(readFileSync(join(out, 'other.code'), 'utf8').trim()).toBe('1');
    expect(readFileSync(join(out, 'other.out'), 'utf8')).toBe('');
    expect(readFileSync(join(out, 'other.err'), 'utf8')).toMatch(/^svcd: error: .* \[not_granted\]\n$/);
  });

  it('refuses a forged session, a revoked grant, and the session of an agent that has exited', async () => {
    const sock = join(home, 'svcd', 'secrets.sock');
    const session = readFileSync(join(out, 'session'), 'utf8');
    expect(codeOf(await ask(sock, session, 'DEPLOY_KEY'))).toBe('ok');
    expect(codeOf(await ask(sock, `${session.slice(0, -1)}x`, 'DEPLOY_KEY'))).toBe('unknown_session');
    expect(codeOf(await ask(sock, session, 'NO_SUCH_KEY'))).toBe('secret_not_found');

    await svc(['secret', 'revoke', 'DEPLOY_KEY', '--domain', domainId, '--agent', agentId]);
    expect(codeOf(await ask(sock, session, 'DEPLOY_KEY'))).toBe('not_granted');
    await svc(['secret', 'grant', 'DEPLOY_KEY', '--domain', domainId, '--agent', agentId]);
    expect(codeOf(await ask(sock, session, 'DEPLOY_KEY'))).toBe('ok');

    await svc(['agent', 'supervise', 'stop', agentId]);
    await waitFor('the agent to stop', async () => {
      const s = JSON.parse(await svc(['--json', 'agent', 'supervise', 'status', agentId])) as {
        state: string;
        pid: number | null;
      };
      return s.state !== 'running' && s.pid === null;
    });
    expect(codeOf(await ask(sock, session, 'DEPLOY_KEY'))).toBe('unknown_session');
  });

  it('audits every fetch as a matrix event, without the value', async () => {
    const admin = readFileSync(join(home, 'tower', 'admin.token'), 'utf8').trim();
    const Database = (await import('better-sqlite3')).default;
    const db = new Database(join(home, 'tower', 'tower.db'), { readonly: true });
    try {
      const rows = db
        .prepare("select agent_id, payload from events where type = 'matrix' order by id")
        .all() as { agent_id: string | null; payload: string }[];
      const fetches = rows
        .map((r) => ({ agent: r.agent_id, p: JSON.parse(r.payload) as Record<string, unknown> }))
        .filter((e) => String(e.p.action).startsWith('fetch'));
      expect(fetches.map((e) => [e.agent, e.p.action, e.p.name, e.p.reason ?? null])).toEqual([
        [agentId, 'fetched', 'DEPLOY_KEY', null],
        [agentId, 'fetched', 'DEPLOY_KEY', null],
        [agentId, 'fetch_refused', 'OTHER_KEY', 'not_granted'],
        [agentId, 'fetched', 'DEPLOY_KEY', null],
        [agentId, 'fetch_refused', 'NO_SUCH_KEY', 'secret_not_found'],
        [agentId, 'fetch_refused', 'DEPLOY_KEY', 'not_granted'],
        [agentId, 'fetched', 'DEPLOY_KEY', null],
      ]);
    } finally {
      db.close();
    }
    expect(admin).toMatch(/^svc_/);
  });

  it('leaves neither value anywhere: SVC_HOME, tower database, logs, feed, svcd environment', async () => {
    await waitFor('the feed to carry the fetches', () => feed.text().includes('"fetch_refused"'));
    const { tower } = stack;
    const svcd = stack.svcd as Proc;
    const files = listFiles(home);
    for (const must of [
      join('tower', 'tower.db'),
      join('svcd', 'state.db'),
      join('svcd', 'logs', `${agentId}.log`),
    ]) {
      expect(
        files.some((f) => f.endsWith(must)),
        must,
      ).toBe(true);
    }
    for (const value of [VALUE, OTHER]) {
      for (const f of files) expect(readFileSync(f).includes(Buffer.from(value)), f).toBe(false);
      for (const f of listFiles(out)) expect(readFileSync(f).includes(Buffer.from(value)), f).toBe(false);
      for (const log of [tower.stdout(), tower.stderr(), svcd.stdout(), svcd.stderr()]) {
        expect(log.includes(value)).toBe(false);
      }
      expect(readFileSync(`/proc/${svcd.child.pid}/environ`).includes(Buffer.from(value))).toBe(false);
      expect(feed.text().includes(value)).toBe(false);
    }
  });
});
