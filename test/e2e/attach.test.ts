// `svc attach` end to end: a tower, a registered node, svcd supervising a reference agent in
// a PTY, and `svc attach` driven inside tmux (send-keys, capture-pane), locally over svcd.sock
// and from another machine's point of view through the tower: typed input reaches the agent,
// output comes back, a resize reaches the PTY, the detach key restores the shell's terminal.
// A browser-style client (ws with a ticket and an Origin) does the same; a svcd restart ends
// open sessions with a frame and the next attach works; wrong domain and node offline are
// refused with their codes; a node that rejects the signature answers secret_mismatch; a
// viewer that comes back sees what it missed; attach open/close are matrix events in the
// feed; random control frames and garbage through the tower hurt nothing.
import { spawnSync } from 'node:child_process';
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { closeCodeOf, NODE_ATTACH_PREFIX } from '../../src/protocol/attach.js';
import { checkAttachOpen } from '../../src/protocol/attach-signature.js';
import { type AttachOpen, CONTROL_PATH } from '../../src/protocol/control.js';
import { attachViewer } from '../support/node-channel.js';
import { type NodeStack, startNodeStack } from '../support/node-stack.js';
import { waitFor } from '../support/poll.js';
import { type Proc, run, SVC_BIN, SVCD_BIN, type TowerProc } from '../support/procs.js';
import { captureFeed } from './feed-capture.js';

const TMUX_SOCKET = `svc-e2e-attach-${process.pid}-${Math.random().toString(36).slice(2, 8)}`;
let stack: NodeStack;
let tower: TowerProc;
let svcd: Proc;
let cli: NodeJS.ProcessEnv;
let agentId: string;
let domainId: string;
let nodeId: string;
let adminToken: string;
/** A viewer elsewhere: no svcd of its own, the tower's URL and a token. */
let remote: NodeJS.ProcessEnv;

const tmux = (...args: string[]) =>
  spawnSync('tmux', ['-L', TMUX_SOCKET, ...args], {
    encoding: 'utf8',
    env: { ...cli, TERM: 'xterm-256color' },
  });
const shq = (s: string) => `'${s.replace(/'/g, "'\\''")}'`;
const envPrefix = (e: NodeJS.ProcessEnv) =>
  ['SVC_HOME', 'SVC_BASE_URL', 'SVC_TOKEN', 'SVC_NODE_FILE', 'HOME']
    .filter((k) => e[k] !== undefined)
    .map((k) => `${k}=${shq(e[k] as string)}`)
    .join(' ');
const pane = (target: string) => tmux('capture-pane', '-p', '-J', '-S', '-200', '-t', target).stdout;
const sendLine = (target: string, text: string) => {
  tmux('send-keys', '-t', target, '-l', text);
  tmux('send-keys', '-t', target, 'Enter');
};
/**
 * Resizes the tmux window of `svc attach` and waits until the agent's PTY reports that size.
 * The resize travels as SIGWINCH to svc attach, a resize frame, then svcd: ask `stty size`
 * again until it has arrived, as one ask right after the resize could see the old size.
 */
async function resizeAndExpect(target: string, cols: number, rows: number): Promise<void> {
  tmux('resize-window', '-t', target, '-x', String(cols), '-y', String(rows));
  await waitFor(
    `the PTY to report ${rows} ${cols} after SIGWINCH`,
    () => {
      if (pane(target).includes(`${rows} ${cols}`)) return true;
      sendLine(target, 'run: stty size < /dev/tty');
      return false;
    },
    { intervalMs: 1000 },
  );
}
/** Detaches with Ctrl-] d and checks the shell got its terminal back. */
async function detach(target: string, agent: string): Promise<void> {
  tmux('send-keys', '-t', target, 'C-]', 'd');
  await waitFor('the detach message', () => pane(target).includes(`[detached from ${agent}]`));
  await expectRestored(target);
}

async function svc(args: string[], input?: string): Promise<string> {
  const r = await run(SVC_BIN, args, cli, input);
  if (r.code !== 0) throw new Error(`svc ${args.join(' ')} failed (${r.code}): ${r.stderr}`);
  return r.stdout;
}

async function agentRunning(): Promise<void> {
  await waitFor(
    'the PTY agent to run',
    async () => {
      if (svcd.child.exitCode !== null) throw new Error(`svcd exited: ${svcd.stderr()}`);
      const r = await run(SVC_BIN, ['--json', 'agent', 'supervise', 'list'], cli);
      if (r.code !== 0) return false;
      const items = (JSON.parse(r.stdout) as { items: { id: string; state: string }[] }).items;
      return items.some((a) => a.id === agentId && a.state === 'running');
    },
    { timeoutMs: 90_000 },
  );
}

beforeAll(async () => {
  stack = await startNodeStack({
    name: 'attach',
    hostname: 'attach-node',
    svcd: { args: ['--log-level', 'warn'] },
    beforeSvcd: async (s) => {
      ({ tower, cli, adminToken } = s);
      nodeId = s.node.node_id;
      domainId = (JSON.parse(await svc(['--json', 'domain', 'create', 'ops'])) as { id: string }).id;
      agentId = await s.enrol(domainId, 'tty');
      writeFileSync(
        join(s.home, 'svcd', 'agents.toml'),
        `[[agent]]\nid = "${agentId}"\nruntime = "alpha_code"\nsupervise = true\npty = true\ncommand = ["node", ${JSON.stringify(SVCD_BIN)}, "reference-agent", "--interactive"]\n`,
      );
    },
  });
  svcd = stack.svcd as Proc;
  const elsewhere = join(stack.tmp.dir, 'elsewhere');
  mkdirSync(elsewhere, { recursive: true, mode: 0o700 });
  remote = {
    ...stack.env,
    SVC_HOME: elsewhere,
    SVC_NODE_FILE: join(elsewhere, 'node.json'),
    SVC_BASE_URL: tower.url,
    SVC_TOKEN: adminToken,
  };
  await agentRunning();
  tmux('-f', '/dev/null', 'new-session', '-d', '-s', 'boot', '-x', '100', '-y', '30');
  tmux('set', '-g', 'status', 'off');
});

afterAll(async () => {
  tmux('kill-server');
  rmSync(join(process.env.TMUX_TMPDIR ?? '/tmp', `tmux-${process.getuid?.() ?? 0}`, TMUX_SOCKET), {
    force: true,
  });
  await stack?.stop();
});

/** A fresh shell in its own tmux window, with the stty state saved for the restore check. */
function shell(name: string): string {
  tmux('new-window', '-d', '-n', name, 'sh');
  const target = `=boot:${name}`;
  tmux('resize-window', '-t', target, '-x', '100', '-y', '30');
  sendLine(target, 'S0=$(stty -g)');
  return target;
}

async function expectRestored(target: string): Promise<void> {
  sendLine(target, '[ "$S0" = "$(stty -g)" ] && echo TTY-RESTORED-$((40+2))');
  await waitFor('the shell with its terminal restored', () => pane(target).includes('TTY-RESTORED-42'));
}

describe('svc attach to a local agent (svcd.sock)', () => {
  it('types into the agent, shows its output, resizes its PTY and detaches with Ctrl-] d', async () => {
    const w = shell('local');
    sendLine(w, `node ${SVC_BIN} attach ${agentId}`);
    await waitFor('the attach banner', () => pane(w).includes(`attached to ${agentId} via svcd.sock`));
    sendLine(w, 'hello from tmux');
    await waitFor('the echo', () => pane(w).includes('echo: hello from tmux'));
    sendLine(w, 'run: stty size < /dev/tty');
    await waitFor('the PTY size of the tmux pane', () => pane(w).includes('30 100'));
    await resizeAndExpect(w, 90, 25);
    await detach(w, agentId);
  });

  it('shows the current screen at once to a second attach', async () => {
    const w = shell('again');
    sendLine(w, `node ${SVC_BIN} attach --read-only ${agentId}`);
    await waitFor('the earlier output in the snapshot', () => pane(w).includes('echo: hello from tmux'));
    await detach(w, agentId);
  });
});

/** The events in an SSE capture (its data: lines). */
function feedEvents(text: string): Record<string, unknown>[] {
  return text
    .split('\n')
    .filter((l) => l.startsWith('data: '))
    .map((l) => JSON.parse(l.slice(6)) as Record<string, unknown>);
}

const wsUrl = (q: Record<string, string>) =>
  `${tower.url.replace(/^http/, 'ws')}/api/attach-ws?${new URLSearchParams(q)}`;

async function ticket(
  body: Record<string, unknown>,
  token = adminToken,
): Promise<{ status: number; json: Record<string, unknown> }> {
  const res = await fetch(`${tower.url}/api/attach-tickets`, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  return { status: res.status, json: (await res.json()) as Record<string, unknown> };
}

describe('svc attach through the tower', () => {
  it('types into the agent, shows its output, resizes its PTY and detaches with Ctrl-] d', async () => {
    const w = shell('remote');
    sendLine(w, `${envPrefix(remote)} node ${SVC_BIN} attach ${agentId}`);
    await waitFor('the attach banner', () => pane(w).includes(`attached to ${agentId} via the tower`));
    sendLine(w, 'hello via tower');
    await waitFor('the echo', () => pane(w).includes('echo: hello via tower'));
    await resizeAndExpect(w, 84, 21);
    await detach(w, agentId);
  });

  it('serves a browser-style client with a single-use ticket and checks its Origin', async () => {
    const t = await ticket({ node: nodeId, agent: agentId });
    expect(t.status).toBe(201);
    expect(t.json).toMatchObject({ node: nodeId, agent: agentId, read_only: false });
    // As a browser page would open it: the ticket in ?token= (?ticket= is the same).
    const v = await attachViewer(wsUrl({ token: t.json.ticket as string, cols: '80', rows: '24' }), {
      origin: tower.url,
    });
    await waitFor('the screen snapshot', () => v.out().includes('echo: hello via tower'));
    v.ws.send(Buffer.from('from the browser\r'));
    await waitFor('the echo', () => v.out().includes('echo: from the browser'));
    v.ws.send(JSON.stringify({ type: 'resize', cols: 77, rows: 19 }));
    v.ws.send(Buffer.from('run: stty size < /dev/tty\r'));
    await waitFor('the resize', () => v.out().includes('19 77'));
    v.ws.close();
    await v.closed;

    // Used once: the same ticket again is refused.
    const again = await attachViewer(wsUrl({ ticket: t.json.ticket as string }), { origin: tower.url });
    expect(await again.closed).toBe(4401);
    expect(again.frames).toMatchObject([{ type: 'error', code: 'unauthenticated' }]);

    // Another site's page may not use a ticket.
    const t2 = await ticket({ node: nodeId, agent: agentId });
    const foreign = await attachViewer(wsUrl({ ticket: t2.json.ticket as string }), {
      origin: 'https://evil.example',
    });
    expect(await foreign.closed).toBe(4403);
    expect(foreign.frames).toMatchObject([{ type: 'error', code: 'not_authorized' }]);
  });

  it('shows a viewer that comes back what it missed, even a screen bigger than one frame', async () => {
    const auth = { authorization: `Bearer ${adminToken}` };
    const a = await attachViewer(wsUrl({ node: nodeId, agent: agentId, cols: '100', rows: '30' }), auth);
    a.ws.send(Buffer.from('before the refresh\r'));
    await waitFor('the echo', () => a.out().includes('echo: before the refresh'));
    // The page reloads while the agent prints far more than one WebSocket frame's worth
    // (the snapshot of this scrollback is over the tower's 64 KiB frame limit).
    const seq = (from: number, to: number) => `run: seq -f '%04g-${'x'.repeat(90)}' ${from} ${to}\r`;
    a.ws.send(Buffer.from(`${seq(1, 550)}${seq(551, 900)}while away\r`));
    a.ws.close();
    await a.closed;
    const b = await attachViewer(wsUrl({ node: nodeId, agent: agentId, cols: '100', rows: '30' }), auth);
    await waitFor('what happened while away', () => b.out().includes('echo: while away'));
    expect(b.out()).toContain('echo: before the refresh');
    expect(b.out()).toContain(`0001-${'x'.repeat(90)}`);
    expect(b.out()).toContain(`0900-${'x'.repeat(90)}`);
    expect(b.frames).toEqual([]);
    b.ws.send(Buffer.from('back again\r'));
    await waitFor('the echo after coming back', () => b.out().includes('echo: back again'));
    b.ws.close();
    await b.closed;
  });

  it('records every attach through the tower as a matrix event: who, which agent, how long', async () => {
    const feed = captureFeed(tower.url, adminToken);
    try {
      const tok = (
        JSON.parse(
          await svc([
            '--json',
            'token',
            'create',
            '--name',
            'watcher',
            '--scope',
            'feed:read',
            '--domain',
            domainId,
          ]),
        ) as { token: string }
      ).token;
      const v = await attachViewer(wsUrl({ node: nodeId, agent: agentId, read_only: '1' }), {
        authorization: `Bearer ${tok}`,
      });
      await waitFor('the snapshot', () => v.out().length > 0);
      v.ws.close();
      await v.closed;
      const mine = await waitFor('the open and close events', () => {
        const evs = feedEvents(feed.text()).filter(
          (e) => e.type === 'matrix' && (e.payload as { who?: string }).who === 'watcher',
        );
        return evs.length === 2 ? evs : null;
      });
      expect(mine.map((e) => [e.status, e.agent_id])).toEqual([
        ['attach_opened', agentId],
        ['attach_closed', agentId],
      ]);
      const [opened, closed] = mine.map((e) => e.payload as Record<string, unknown>);
      expect(opened).toMatchObject({ node_id: nodeId, agent_id: agentId, via: 'tower', read_only: true });
      expect(closed?.viewer_id).toBe(opened?.viewer_id);
      expect(closed?.duration_ms).toEqual(expect.any(Number));
      expect(closed?.duration_ms as number).toBeGreaterThanOrEqual(0);
    } finally {
      await feed.stop();
    }
  });

  it('survives random control frames, binary garbage and absurd sizes through the tower', async () => {
    const auth = { authorization: `Bearer ${adminToken}` };
    const frame = fc.oneof(
      fc.json(),
      fc.string(),
      fc
        .record({
          type: fc.constantFrom('resize', 'exit', 'error', 'attach.open'),
          cols: fc.oneof(fc.integer(), fc.double(), fc.constant(1e308), fc.string()),
          rows: fc.oneof(fc.integer(), fc.double(), fc.constant(-1), fc.constant(null)),
          code: fc.oneof(fc.string(), fc.integer()),
        })
        .map((o) => JSON.stringify(o)),
    );
    const sizes = fc.oneof(
      fc.constant('1e308'),
      fc.constant('-5'),
      fc.constant('NaN'),
      fc.integer().map(String),
    );
    for (const [cols, rows] of fc.sample(fc.tuple(sizes, sizes), 5)) {
      const v = await attachViewer(wsUrl({ node: nodeId, agent: agentId, cols, rows }), auth);
      await waitFor('the snapshot', () => v.out().length > 0);
      for (const f of fc.sample(frame, 60)) v.ws.send(f);
      // No control bytes: a stray ^C or ^D would end the agent, which is not what this tests.
      for (const g of fc.sample(fc.uint8Array({ maxLength: 64 }), 10))
        v.ws.send(Buffer.from(g.filter((b) => b >= 0x20 && b < 0x7f)), { binary: true });
      v.ws.send(Buffer.from('\x15'), { binary: true }); // ^U: drop the garbage line
      v.ws.close();
      await v.closed;
    }
    expect((await fetch(`${tower.url}/healthz`)).status).toBe(200);
    const after = await attachViewer(wsUrl({ node: nodeId, agent: agentId, cols: '100', rows: '30' }), auth);
    after.ws.send(Buffer.from('\x15still answering\r'));
    await waitFor('the agent through the tower', () => after.out().includes('echo: still answering'));
    after.ws.close();
    await after.closed;
  });

  it('refuses with secret_mismatch when the node does not accept the signature', async () => {
    // A node whose secret changed without the tower learning it (the node here is the test,
    // checking with the same function svcd uses; svcd's side is in gateway.test.ts).
    const home2 = join(stack.tmp.dir, 'mismatch');
    mkdirSync(home2, { recursive: true, mode: 0o700 });
    const nodeEnv = {
      ...cli,
      SVC_HOME: home2,
      SVC_NODE_FILE: join(home2, 'node.json'),
      SVC_TOKEN: adminToken,
    };
    const reg = await run(SVC_BIN, ['agent', 'node', 'register', '--hostname', 'mismatch-node'], nodeEnv);
    expect(reg.stderr).toBe('');
    expect(reg.code).toBe(0);
    const other = JSON.parse(readFileSync(join(home2, 'node.json'), 'utf8')) as {
      jwt: string;
      node_id: string;
    };
    const wsBase = tower.url.replace(/^http/, 'ws');
    const control = new WebSocket(`${wsBase}${CONTROL_PATH}`, {
      headers: { authorization: `Bearer ${other.jwt}` },
    });
    try {
      const welcomed = new Promise<void>((resolve) =>
        control.on('message', (d) => {
          const m = JSON.parse(d.toString()) as AttachOpen | { type: string };
          if (m.type === 'welcome') resolve();
          if (m.type !== 'attach.open') return;
          const bad = checkAttachOpen('b'.repeat(64), m as AttachOpen, Date.now());
          const back = new WebSocket(`${wsBase}${NODE_ATTACH_PREFIX}${(m as AttachOpen).stream_id}`, {
            headers: { authorization: `Bearer ${other.jwt}` },
          });
          back.on('open', () =>
            back.send(JSON.stringify({ type: 'error', ...bad }), () =>
              back.close(closeCodeOf(bad?.code ?? 'internal')),
            ),
          );
        }),
      );
      await new Promise((r) => control.once('open', r));
      control.send(JSON.stringify({ type: 'hello', version: 'test', attach_secret: 'a'.repeat(64) }));
      await welcomed;
      const v = await attachViewer(wsUrl({ node: other.node_id, agent: 'anything' }), {
        authorization: `Bearer ${adminToken}`,
      });
      expect(await v.closed).toBe(4403);
      expect(v.frames).toMatchObject([{ type: 'error', code: 'secret_mismatch' }]);
    } finally {
      control.close();
    }
  });

  it('refuses a credential of another domain', async () => {
    const other = (JSON.parse(await svc(['--json', 'domain', 'create', 'elsewhere'])) as { id: string }).id;
    const tok = (
      JSON.parse(
        await svc([
          '--json',
          'token',
          'create',
          '--name',
          'other',
          '--scope',
          'work:write',
          '--domain',
          other,
        ]),
      ) as { token: string }
    ).token;
    const v = await attachViewer(wsUrl({ node: nodeId, agent: agentId }), { authorization: `Bearer ${tok}` });
    expect(await v.closed).toBe(4403);
    expect(v.frames).toMatchObject([{ type: 'error', code: 'not_authorized' }]);
    expect((await ticket({ node: nodeId, agent: agentId }, tok)).json).toMatchObject({
      code: 'not_authorized',
    });
  });

  it('ends an open session when svcd restarts, attaches again at once, and says when the node is offline', async () => {
    const v = await attachViewer(wsUrl({ node: nodeId, agent: agentId }), {
      authorization: `Bearer ${adminToken}`,
    });
    await waitFor('the snapshot', () => v.out().length > 0);
    svcd.kill('SIGTERM');
    await svcd.exited;
    await v.closed;
    expect(v.frames.map((f) => f.type)).toEqual([expect.stringMatching(/^(error|exit)$/)]);

    const off = await attachViewer(wsUrl({ node: nodeId, agent: agentId }), {
      authorization: `Bearer ${adminToken}`,
    });
    expect(await off.closed).toBe(4503);
    expect(off.frames).toMatchObject([{ type: 'error', code: 'node_offline' }]);

    svcd = await stack.startSvcd(['--log-level', 'warn']);
    await agentRunning();
    // A new attach secret was registered; no operator action is needed.
    const next = await waitFor('an attach after the restart', async () => {
      const n = await attachViewer(wsUrl({ node: nodeId, agent: agentId }), {
        authorization: `Bearer ${adminToken}`,
      });
      const first = await Promise.race([
        n.closed.then(() => 'closed'),
        waitFor('output', () => n.out().length > 0 && 'open'),
      ]);
      return first === 'open' ? n : null;
    });
    next.ws.send(Buffer.from('after restart\r'));
    await waitFor('the echo', () => next.out().includes('echo: after restart'));
    next.ws.close();
  });
});
