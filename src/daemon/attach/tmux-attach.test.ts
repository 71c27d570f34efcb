// Attaching to a mux_hosted agent: the gateway holds a tmux client on the agent's session in
// a PTY; viewers type into the pane, see it, resize its window, and the client goes away with
// the last viewer (the pane stays). Real tmux on a private server socket.
import { spawnSync } from 'node:child_process';
import { rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { makeTestDaemonContext, type TestDaemonContext } from '../../../test/support/daemon-ctx.js';
import { waitFor } from '../../../test/support/poll.js';
import { type AttachListResult, LOCAL_ATTACH_PATH } from '../../protocol/attach.js';
import { createSupervisor, type Supervisor } from '../supervisor/supervisor.js';
import { defaultSvcdConfig } from '../svcd-config.js';
import { type AttachGateway, createAttachGateway } from './gateway.js';
import { attachMethods } from './methods.js';

const SOCKET = `svc-test-attach-${process.pid}-${Math.random().toString(36).slice(2, 8)}`;
const tmux = (...args: string[]) => spawnSync('tmux', ['-L', SOCKET, ...args], { encoding: 'utf8' });
const capture = () => tmux('capture-pane', '-p', '-t', '=desk:').stdout;

let t: TestDaemonContext | null = null;
let sup: Supervisor | null = null;
let gw: AttachGateway | null = null;
const sockets: WebSocket[] = [];

afterEach(async () => {
  for (const s of sockets.splice(0)) s.terminate();
  await gw?.stop();
  await sup?.stop();
  await t?.close();
  gw = null;
  sup = null;
  t = null;
  tmux('kill-server');
  rmSync(join(process.env.TMUX_TMPDIR ?? '/tmp', `tmux-${process.getuid?.() ?? 0}`, SOCKET), { force: true });
});

async function start(): Promise<TestDaemonContext> {
  t = await makeTestDaemonContext();
  writeFileSync(t.ctx.paths.agentsToml, '[[agent]]\nid = "pane"\nruntime = "mux_hosted"\nsession = "desk"\n');
  const config = defaultSvcdConfig();
  config.supervisor.tmuxSocket = SOCKET;
  config.supervisor.stopGraceMs = 2000;
  sup = createSupervisor(t.ctx, { config, userBus: false });
  gw = createAttachGateway(t.ctx, sup);
  t.register(attachMethods(gw));
  await sup.start();
  await gw.start();
  await waitFor('the agent in its pane', () => capture().includes('reference agent ready'));
  return t;
}

function viewer(c: TestDaemonContext, q: string) {
  const ws = new WebSocket(`ws+unix://${c.ctx.paths.svcdSock}:${LOCAL_ATTACH_PATH}?${q}`);
  sockets.push(ws);
  let out = '';
  const frames: Record<string, unknown>[] = [];
  ws.on('message', (d, bin) => {
    if (bin) out += d.toString();
    else frames.push(JSON.parse(d.toString()) as Record<string, unknown>);
  });
  const closed = new Promise<number>((r) => ws.once('close', (code) => r(code)));
  return new Promise<{ ws: WebSocket; out: () => string; frames: typeof frames; closed: Promise<number> }>(
    (resolve, reject) => {
      ws.once('open', () => resolve({ ws, out: () => out, frames, closed }));
      ws.once('error', reject);
    },
  );
}

const paneSize = () =>
  tmux('display-message', '-p', '-t', '=desk:', '#{pane_width} #{pane_height}').stdout.trim();
const clients = () => tmux('list-clients', '-F', '#{client_tty}').stdout.split('\n').filter(Boolean);

describe('attach to a mux_hosted agent', () => {
  it('types into the pane, shows it, resizes its window, and leaves the pane when the last viewer goes', async () => {
    const c = await start();
    const list = await c.call<AttachListResult>('attach.list');
    expect(list.items.map((i) => i.agent_id)).toEqual(['pane']);

    const a = await viewer(c, 'agent=pane&cols=90&rows=20');
    await waitFor('the pane on the screen', () => a.out().includes('reference agent ready'));
    a.ws.send(Buffer.from('hello pane\r'));
    await waitFor('the echo through tmux', () => a.out().includes('echo: hello pane'));
    expect(capture()).toContain('echo: hello pane');
    a.ws.send(Buffer.from('run: stty size < /dev/tty\r'));
    // The pane is the viewer's size less tmux's status line.
    await waitFor('the window sized for the viewer', () => a.out().includes('19 90'));
    a.ws.send(JSON.stringify({ type: 'resize', cols: 70, rows: 15 }));
    // tmux applies a client's resize asynchronously (SIGWINCH to the client, then a message
    // to the server): keys typed at once could still see the old size.
    await waitFor('tmux to resize the pane', () => paneSize() === '70 14');
    // tmux may report the new pane size before it has resized the pane's PTY: ask until the
    // PTY inside says so too.
    await waitFor(
      'the window resized',
      () => {
        if (a.out().includes('14 70')) return true;
        a.ws.send(Buffer.from('run: stty size < /dev/tty\r'));
        return false;
      },
      { intervalMs: 500 },
    );

    // A second viewer shares the client and sees the current screen at once.
    const b = await viewer(c, 'agent=pane&read_only=1');
    await waitFor('the screen for the second viewer', () => b.out().includes('14 70'));
    expect(clients()).toHaveLength(1);
    expect((await c.call<AttachListResult>('attach.list')).items[0]?.viewers).toHaveLength(2);

    a.ws.close();
    b.ws.close();
    await Promise.all([a.closed, b.closed]);
    await waitFor('the tmux client gone', () => clients().length === 0);
    expect(tmux('list-sessions', '-F', '#{session_name}').stdout).toBe('desk\n');
    expect(c.events.map((e) => e.status)).toEqual([
      'attach_opened',
      'attach_opened',
      'attach_closed',
      'attach_closed',
    ]);

    // And again, with a new client.
    const again = await viewer(c, 'agent=pane');
    again.ws.send(Buffer.from('once more\r'));
    await waitFor('the echo', () => again.out().includes('echo: once more'));
  });

  it('ends the viewers with an exit frame when the agent stops', async () => {
    const c = await start();
    const v = await viewer(c, 'agent=pane');
    await waitFor('the pane on the screen', () => v.out().includes('reference agent ready'));
    await sup?.stopAgent('pane');
    expect(await v.closed).toBe(1000);
    expect(v.frames).toMatchObject([{ type: 'exit' }]);
    const after = await viewer(c, 'agent=pane');
    expect(await after.closed).toBe(4409);
    expect(after.frames).toMatchObject([{ type: 'error', code: 'agent_not_running' }]);
  });
});
