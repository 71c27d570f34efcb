// The attach gateway in process: a real PTY reference agent under the supervisor, viewers over
// svcd.sock (WebSocket on the unix socket) and over a fake tower's dial-back endpoint.
import { writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import fc from 'fast-check';
import { afterEach, describe, expect, it } from 'vitest';
import WebSocket, { WebSocketServer } from 'ws';
import type { fakeControl } from '../../../test/support/control.js';
import { makeTestDaemonContext, type TestDaemonContext } from '../../../test/support/daemon-ctx.js';
import { waitFor } from '../../../test/support/poll.js';
import {
  ATTACH_FRAME_BYTES,
  type AttachListResult,
  LOCAL_ATTACH_PATH,
  TOWER_MAX_FRAME_BYTES,
} from '../../protocol/attach.js';
import { attachSignature } from '../../protocol/attach-signature.js';
import type { AttachOpen } from '../../protocol/control.js';
import { createSupervisor, type Supervisor } from '../supervisor/supervisor.js';
import { defaultSvcdConfig } from '../svcd-config.js';
import { type AttachGateway, createAttachGateway } from './gateway.js';
import { attachMethods } from './methods.js';

let t: TestDaemonContext | null = null;
let sup: Supervisor | null = null;
let gw: AttachGateway | null = null;
const closers: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const c of closers.splice(0).reverse()) await c();
  await gw?.stop();
  await sup?.stop();
  await t?.close();
  gw = null;
  sup = null;
  t = null;
});

async function start(
  agents = 1,
  command = ['svcd', 'reference-agent', '--interactive'],
): Promise<TestDaemonContext> {
  t = await makeTestDaemonContext();
  const toml = Array.from(
    { length: agents },
    (_, i) =>
      `[[agent]]\nid = "tty${i || ''}"\nruntime = "alpha_code"\nsupervise = true\npty = true\ncommand = ${JSON.stringify(command)}\n`,
  ).join('\n');
  writeFileSync(t.ctx.paths.agentsToml, toml);
  const config = defaultSvcdConfig();
  config.supervisor.stopGraceMs = 2000;
  sup = createSupervisor(t.ctx, { config, userBus: false });
  gw = createAttachGateway(t.ctx, sup);
  t.register(attachMethods(gw));
  await sup.start();
  await gw.start();
  return t;
}

interface TestViewer {
  ws: WebSocket;
  out(): string;
  frames: Record<string, unknown>[];
  closed: Promise<number>;
  type(s: string): void;
  /** Waits until the output holds `text`; fails at once, saying why, if the viewer is closed first. */
  sees(what: string, text: string, opts?: { timeoutMs?: number }): Promise<void>;
}

function viewer(url: string, opts: WebSocket.ClientOptions = {}): Promise<TestViewer> {
  const ws = new WebSocket(url, opts);
  let out = '';
  const frames: Record<string, unknown>[] = [];
  ws.on('message', (d, bin) => {
    if (bin) out += d.toString();
    else frames.push(JSON.parse(d.toString()) as Record<string, unknown>);
  });
  let closeCode: number | null = null;
  const closed = new Promise<number>((r) =>
    ws.once('close', (code) => {
      closeCode = code;
      r(code);
    }),
  );
  closers.push(() => {
    ws.terminate();
  });
  // The reference agent runs from the build (dist/cli/svcd.js): when it cannot start (dist/
  // missing, e.g. deleted by an `npm run build` in the same checkout while the tests run), the
  // session ends with an exit frame and the agent's own error in the output. Report that at
  // once instead of waiting out the deadline for output that can no longer come.
  const sees = async (what: string, text: string, opts: { timeoutMs?: number } = {}) => {
    const r = await waitFor(what, () => (out.includes(text) ? 'seen' : closeCode !== null && 'closed'), opts);
    if (r === 'closed') {
      throw new Error(
        `the viewer was closed (${closeCode}) before ${what}; frames: ${JSON.stringify(frames)}; output: ${JSON.stringify(out.slice(-2000))}`,
      );
    }
  };
  return new Promise((resolve, reject) => {
    ws.once('open', () =>
      resolve({
        ws,
        out: () => out,
        frames,
        closed,
        type: (s) => ws.send(Buffer.from(s), { binary: true }),
        sees,
      }),
    );
    ws.once('error', reject);
  });
}

const local = (c: TestDaemonContext, q: string) =>
  viewer(`ws+unix://${c.ctx.paths.svcdSock}:${LOCAL_ATTACH_PATH}?${q}`);

describe('attach over svcd.sock', () => {
  it('carries input and output, resizes the PTY, and lists the viewer', async () => {
    const c = await start();
    const v = await local(c, 'agent=tty&cols=90&rows=20');
    v.type('hello attach\r');
    await v.sees('the echo', 'echo: hello attach');
    v.type('run: stty size < /dev/tty\r');
    await v.sees('the size of the viewer', '20 90');
    v.ws.send(JSON.stringify({ type: 'resize', cols: 100, rows: 31 }));
    v.type('run: stty size < /dev/tty\r');
    await v.sees('the new size', '31 100');

    const list = await c.call<AttachListResult>('attach.list');
    expect(list.items).toHaveLength(1);
    expect(list.items[0]).toMatchObject({ agent_id: 'tty', cols: 100, rows: 31 });
    expect(list.items[0]?.viewers).toMatchObject([{ via: 'local', who: 'local', read_only: false }]);
    v.ws.close();
    await v.closed;
    await waitFor('the close event', () => c.events.some((e) => e.status === 'attach_closed'));
    expect(c.events.map((e) => [e.type, e.status, e.agent_id])).toEqual([
      ['matrix', 'attach_opened', 'tty'],
      ['matrix', 'attach_closed', 'tty'],
    ]);
    expect(typeof c.events[1]?.payload.duration_ms).toBe('number');
  });

  it('shows a viewer that comes back what it missed, and keeps read-only viewers from typing', async () => {
    const c = await start();
    const a = await local(c, 'agent=tty');
    a.type('first line\r');
    await a.sees('the echo', 'echo: first line');
    a.ws.close();
    await a.closed;
    // Output while nobody watches.
    await sup?.signal('tty', 'while away');
    const ro = await local(c, 'agent=tty&read_only=1');
    await ro.sees('the missed output in the snapshot', 'echo: while away');
    expect(ro.out()).toContain('echo: first line');
    ro.type('from read-only\r');
    ro.ws.send(JSON.stringify({ type: 'resize', cols: 50, rows: 10 }));
    const w = await local(c, 'agent=tty');
    w.type('from writer\r');
    await ro.sees('the writer echo in both', 'echo: from writer');
    expect(ro.out()).not.toContain('echo: from read-only');
    expect(sup?.terminal('tty')?.cols).not.toBe(50);
  });

  it('refuses an unknown agent with an error frame', async () => {
    const c = await start();
    const v = await local(c, 'agent=nope');
    expect(await v.closed).toBe(4404);
    expect(v.frames).toEqual([
      { type: 'error', code: 'agent_not_found', message: expect.stringContaining('nope') },
    ]);
  });

  it('ends the session with an exit frame when the agent exits', async () => {
    const c = await start();
    const v = await local(c, 'agent=tty');
    await sup?.restartAgent('tty');
    expect(await v.closed).toBe(1000);
    // Killed by the restart: a signal name, or (when the PTY reports the exit before the
    // signal is known, as on a loaded machine) neither code nor signal; never a clean exit.
    expect(v.frames).toHaveLength(1);
    expect(v.frames[0]).toMatchObject({ type: 'exit', code: null });
    const again = await local(c, 'agent=tty');
    again.type('after restart\r');
    await again.sees('the echo after restart', 'echo: after restart');
  });

  it('survives random control frames and binary garbage', { timeout: 60_000 }, async () => {
    const c = await start(2);
    const v = await local(c, 'agent=tty');
    const frame = fc.oneof(
      fc.json(),
      fc.string(),
      fc
        .record({
          type: fc.constant('resize'),
          cols: fc.oneof(fc.integer(), fc.double(), fc.constant(1e308), fc.string()),
          rows: fc.oneof(fc.integer(), fc.double(), fc.constant(-1), fc.constant(null)),
        })
        .map((o) => JSON.stringify(o)),
    );
    for (const f of fc.sample(frame, 300)) v.ws.send(f);
    // Garbage may well stop the agent itself (a stray ^C or ^D); svcd must keep serving.
    for (const g of fc.sample(fc.uint8Array({ maxLength: 64 }), 50))
      v.ws.send(Buffer.from(g), { binary: true });
    const term = sup?.terminal('tty');
    if (term) {
      expect(term.cols).toBeGreaterThanOrEqual(2);
      expect(term.cols).toBeLessThanOrEqual(1000);
    }
    const w = await local(c, 'agent=tty1');
    w.type('still here\r');
    await w.sees('the echo', 'echo: still here');
    expect((await c.call<AttachListResult>('attach.list')).items.map((i) => i.agent_id)).toContain('tty1');
  });

  it('delivers every byte of a flood to a single viewer', { timeout: 90_000 }, async () => {
    const c = await start(1, ['sh']);
    const v = await local(c, 'agent=tty&cols=200&rows=50');
    // 8 MiB: more than the flow-control watermarks, so the PTY is paused and resumed.
    v.type('head -c 8388608 /dev/zero | tr "\\0" "x"; echo; echo FLOOD-$((6*7))\r');
    await v.sees('the end of the flood', 'FLOOD-42', { timeoutMs: 60_000 });
    // Every x of the flood, plus the one in the echoed command line.
    expect(v.out().match(/x/g)?.length).toBe(8 * 1024 * 1024 + 1);
  });
});

describe('attach through the tower', () => {
  async function fakeTower(c: TestDaemonContext): Promise<{
    streams: Map<string, WebSocket>;
    firstText: Map<string, unknown>;
    /** Binary frames per stream from its first byte (a listener added later could miss the snapshot). */
    binary: Map<string, Buffer[]>;
    server: Server;
  }> {
    const server = createServer();
    // The real tower's frame limit: a bigger frame from the node closes the stream (1009).
    const wss = new WebSocketServer({ server, maxPayload: TOWER_MAX_FRAME_BYTES });
    const streams = new Map<string, WebSocket>();
    const firstText = new Map<string, unknown>();
    const binary = new Map<string, Buffer[]>();
    wss.on('connection', (ws, req) => {
      expect(req.headers.authorization).toBe('Bearer x.y.z');
      const id = String(req.url).split('/').pop() as string;
      streams.set(id, ws);
      const frames: Buffer[] = [];
      binary.set(id, frames);
      ws.on('error', () => {}); // e.g. a frame over the limit: the test sees the close
      ws.on('message', (d, bin) => {
        if (bin) frames.push(d as Buffer);
        else if (!firstText.has(id)) firstText.set(id, JSON.parse(d.toString()));
      });
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
    const port = (server.address() as AddressInfo).port;
    c.ctx.tower = { baseUrl: `http://127.0.0.1:${port}`, request: () => Promise.reject(new Error('no')) };
    closers.push(
      () =>
        new Promise<void>((r) => {
          for (const ws of wss.clients) ws.terminate();
          server.close(() => r());
        }),
    );
    return { streams, firstText, binary, server };
  }

  function open(secret: string, streamId: string, ts: number, over: Partial<AttachOpen> = {}): AttachOpen {
    const m = { stream_id: streamId, agent_id: 'tty', cols: 80, rows: 24, read_only: false, ts, ...over };
    return { type: 'attach.open', ...m, sig: attachSignature(secret, m) };
  }

  it('dials back on a signed attach.open and serves the stream', async () => {
    const c = await start();
    const tower = await fakeTower(c);
    const control = c.ctx.control as ReturnType<typeof fakeControl>;
    control.deliver(open(control.attachSecret, 'stream_ok_1', c.ctx.clock.now()));
    const ws = await waitFor('the dial-back', () => tower.streams.get('stream_ok_1'));
    let out = '';
    ws.on('message', (d, bin) => {
      if (bin) out += d.toString();
    });
    ws.send(Buffer.from('through tower\r'));
    await waitFor('the echo', () => out.includes('echo: through tower'));
  });

  it('answers a wrong signature and a stale request with an error frame on the stream', async () => {
    const c = await start();
    const tower = await fakeTower(c);
    const control = c.ctx.control as ReturnType<typeof fakeControl>;
    const errors = (id: string) => waitFor('the error frame', () => tower.firstText.get(id));
    control.deliver(open('0'.repeat(64), 'stream_bad_sig', c.ctx.clock.now()));
    expect(await errors('stream_bad_sig')).toMatchObject({ type: 'error', code: 'secret_mismatch' });
    control.deliver(open(control.attachSecret, 'stream_stale', c.ctx.clock.now() - 10 * 60_000));
    expect(await errors('stream_stale')).toMatchObject({ type: 'error', code: 'not_authorized' });
  });

  it('sends a big screen to a viewer that comes back through the tower in frames the tower accepts', {
    timeout: 90_000,
  }, async () => {
    const c = await start(1, ['sh']);
    const tower = await fakeTower(c);
    const control = c.ctx.control as ReturnType<typeof fakeControl>;
    // Fill the scrollback: 1 000 lines of 200 columns serialize to far more than one frame.
    const v = await local(c, 'agent=tty&cols=200&rows=50');
    v.type('seq -f "%04g $(printf "y%.0s" $(seq 190))" 1 2000; echo SEQ-$((6*7))\r');
    await v.sees('the end of the output', 'SEQ-42', { timeoutMs: 60_000 });
    v.ws.close();
    await v.closed;

    control.deliver(open(control.attachSecret, 'stream_big_1', c.ctx.clock.now(), { cols: 200, rows: 50 }));
    const ws = await waitFor('the dial-back', () => tower.streams.get('stream_big_1'));
    const frames = tower.binary.get('stream_big_1') ?? [];
    const out = () => Buffer.concat(frames).toString();
    const closed = new Promise<number>((r) => ws.once('close', (code) => r(code)));
    await waitFor('the scrollback in the snapshot', () => out().includes('SEQ-42'));
    expect(out()).toContain('1999 yyyy');
    expect(Math.max(...frames.map((f) => f.length))).toBeLessThanOrEqual(ATTACH_FRAME_BYTES);
    ws.send(Buffer.from('echo STILL-$((6*7))\r'));
    await waitFor('the echo after the snapshot', () => out().includes('STILL-42'));
    ws.close();
    await closed;
  });
});
