// The attach gateway (docs/attach.md): one TerminalSession per running PTY agent
// (or per mux_hosted agent with viewers: a tmux client on its session, tmux-client.ts),
// viewers from svcd.sock (local, WebSocket over the unix socket) and from the tower (on a
// signed attach.open the node dials back /nodes/attach/{stream_id}). Every viewer open and
// close is a matrix event; attach.list on mgmt.sock says who is attached where.
// The HTTP server and `ws`'s WebSocketServer are built on the first viewer: an idle daemon
// never needs them.

import { randomBytes } from 'node:crypto';
import type { IncomingMessage, Server } from 'node:http';
import type { Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import type { WebSocket, WebSocketServer } from 'ws';
import type { Clock } from '../../lib/clock.js';
import type { Logger } from '../../lib/log.js';
import {
  type AttachListResult,
  closeCodeOf,
  decodeViewerFrame,
  type ErrorFrame,
  LOCAL_ATTACH_PATH,
  NODE_ATTACH_PREFIX,
  parseSizeQuery,
  splitFrames,
} from '../../protocol/attach.js';
import type { AttachOpen } from '../../protocol/control.js';
import type { ErrorCode } from '../../protocol/errors.js';
import type { Component } from '../component.js';
import type { DaemonPaths } from '../paths.js';
import type { AgentTerminal, PtyTerminal } from '../process/terminal.js';
import { listenUnix, type UnixListener } from '../sockets.js';
import type { TowerApi } from '../tower-client/api.js';
import type { ControlChannel } from '../tower-client/control.js';
import type { EventOutbox } from '../tower-client/outbox.js';
import { TerminalSession, type Viewer, type ViewerOptions } from './session.js';
import { type TmuxTarget, tmuxClientTerminal, tmuxWindowSize } from './tmux-client.js';

/** What the gateway needs of the supervisor. */
export interface TerminalSource {
  terminal(agentId: string): AgentTerminal | null;
  onTerminal(listener: (agentId: string, terminal: AgentTerminal | null) => void): () => void;
  listAgents(): {
    id: string;
    state: string;
    pty?: boolean;
    runtime: string;
    /** mux_hosted: the agent's tmux session. */
    tmux?: TmuxTarget | null;
  }[];
}

/** What the gateway uses of svcd (daemon.ts passes its DaemonContext). */
export interface AttachContext {
  clock: Clock;
  log: Logger;
  paths: Pick<DaemonPaths, 'svcdSock' | 'svcdDir'>;
  /** For the tmux clients of mux_hosted agents. */
  env: NodeJS.ProcessEnv;
  /** Where attach streams dial back to. */
  tower: Pick<TowerApi, 'baseUrl'>;
  /** attach.open arrives here; its signature is checked with the channel's attach secret. */
  control: Pick<ControlChannel, 'on' | 'attachSecret'>;
  identity: { node_id: string; jwt: string };
  events: EventOutbox;
}

export interface AttachGateway extends Component {
  /** Open sessions by agent (tests, benchmarks). */
  session(agentId: string): TerminalSession | null;
  /** attach.list: the agents with a terminal, their size and who is attached. */
  list(): Promise<AttachListResult>;
}

const MAX_FRAME_BYTES = 1024 * 1024;

export function createAttachGateway(ctx: AttachContext, source: TerminalSource): AttachGateway {
  const log = ctx.log.child({ component: 'attach' });
  const sessions = new Map<string, TerminalSession>();
  const muxClients = new Map<TerminalSession, PtyTerminal>();
  /** The HTTP/WebSocket side, made on first use. */
  let wire: Promise<Wire> | null = null;
  const towerSockets = new Set<WebSocket>();
  /** stream ids seen recently: an attach.open is honoured once. */
  const seenStreams = new Map<string, number>();
  let listener: UnixListener | null = null;
  let stopped = false;

  const offTerminal = source.onTerminal((agentId, t) => {
    sessions.get(agentId)?.end({ type: 'exit', code: null, signal: null });
    sessions.delete(agentId);
    if (t) sessions.set(agentId, newSession(t));
  });

  /** `client`: the tmux client of a mux_hosted agent, hung up when its last viewer leaves. */
  function newSession(t: AgentTerminal, client: PtyTerminal | null = null): TerminalSession {
    const s: TerminalSession = new TerminalSession(t, {
      onViewerClosed: (v) => {
        publish('attach_closed', t.agentId, v, { duration_ms: ctx.clock.now() - v.since });
        if (client && s.list().length === 0) endClient(t.agentId, s, client);
      },
    });
    if (client) {
      muxClients.set(s, client);
      client.onExit(() => muxClients.delete(s));
    }
    return s;
  }

  function endClient(agentId: string, s: TerminalSession, client: PtyTerminal): void {
    s.end({ type: 'exit', code: null, signal: null });
    if (sessions.get(agentId) === s) sessions.delete(agentId);
    muxClients.delete(s);
    client.hangUp();
  }

  /**
   * The session of a running PTY agent, made on first use (agents started before us); for a
   * mux_hosted agent, a tmux client attached to its session, sized for this first viewer.
   */
  function sessionOf(
    agentId: string,
    size: { cols: number; rows: number },
  ): TerminalSession | { error: ErrorCode; message: string } {
    const existing = sessions.get(agentId);
    if (existing && !existing.isEnded) return existing;
    const t = source.terminal(agentId);
    if (t) {
      const s = newSession(t);
      sessions.set(agentId, s);
      return s;
    }
    const a = source.listAgents().find((x) => x.id === agentId);
    if (!a) {
      return {
        error: 'agent_not_found',
        message: `no agent "${agentId}" on node ${ctx.identity.node_id} (see "svc agent supervise list")`,
      };
    }
    if (a.runtime === 'mux_hosted' && a.tmux && a.state === 'running') {
      const client = tmuxClientTerminal({
        agentId,
        target: a.tmux,
        env: ctx.env,
        cwd: ctx.paths.svcdDir,
        ...size,
      });
      const s = newSession(client, client);
      sessions.set(agentId, s);
      return s;
    }
    if (a.runtime !== 'mux_hosted' && !a.pty) {
      return {
        error: 'agent_not_found',
        message: `agent "${agentId}" has no terminal to attach to: set pty = true for it in agents.toml`,
      };
    }
    return { error: 'agent_not_running', message: `agent "${agentId}" is ${a.state}; start it first` };
  }

  function publish(status: string, agentId: string, v: ViewerOptions, extra: Record<string, unknown> = {}) {
    ctx.events
      .publish({
        type: 'matrix',
        agent_id: agentId,
        status,
        payload: {
          event: status,
          node_id: ctx.identity.node_id,
          agent_id: agentId,
          viewer_id: v.id,
          via: v.via,
          who: v.who,
          read_only: v.readOnly,
          ...extra,
        },
      })
      .catch((e) => log.warn({ err: e }, 'cannot record attach event'));
  }

  function refuse(ws: WebSocket, code: ErrorCode, message: string): void {
    const f: ErrorFrame = { type: 'error', code, message };
    ws.send(JSON.stringify(f), () => ws.close(closeCodeOf(code), code));
  }

  /** Connects a viewer's WebSocket to the agent's session. */
  function attachViewer(ws: WebSocket, agentId: string, o: Omit<ViewerOptions, 'since'>): void {
    const s = sessionOf(agentId, o);
    if (!(s instanceof TerminalSession)) {
      refuse(ws, s.error, s.message);
      return;
    }
    const v: Viewer = s.attach(
      {
        send: (data, cb) => {
          if (ws.readyState !== ws.OPEN) return cb(new Error('closed'));
          if (typeof data === 'string') return ws.send(data, { binary: false }, cb);
          // A screen snapshot or a big PTY read can exceed what the tower accepts in one frame.
          const frames = splitFrames(data);
          const last = frames.length - 1;
          for (const [i, f] of frames.entries()) ws.send(f, { binary: true }, i === last ? cb : undefined);
        },
        close: (code, reason) => ws.close(code, reason),
      },
      { ...o, since: ctx.clock.now() },
    );
    if (v.closed) return;
    publish('attach_opened', agentId, v);
    ws.on('message', (data, isBinary) => {
      const buf = toBuffer(data);
      if (!isBinary) {
        // Decode before touching: a text frame that is not a control message ends this viewer.
        const d = decodeViewerFrame(buf.toString('utf8'));
        if (d.ok === false) {
          log.warn({ agent: agentId, viewer: v.id, why: d.why }, 'viewer closed: invalid frame');
          ws.close(1008, d.why.slice(0, 120));
          return;
        }
        if (d.ok === 'skip') return;
      }
      s.fromViewer(v, buf, isBinary);
    });
    ws.on('close', () => s.detach(v));
    ws.on('error', () => ws.terminate());
  }

  function loadWire(): Promise<Wire> {
    wire ??= (async () => {
      const [{ createServer }, { WebSocketServer, WebSocket }] = await Promise.all([
        import('node:http'),
        import('ws'),
      ]);
      const wss = new WebSocketServer({ noServer: true, maxPayload: MAX_FRAME_BYTES });
      const http = createServer((_req, res) => {
        res
          .writeHead(426, { 'content-type': 'text/plain' })
          .end('svcd.sock speaks WebSocket: GET /attach?agent=ID\n');
      });
      http.on('upgrade', (req: IncomingMessage, socket: Duplex, head: Buffer) =>
        onUpgrade(wss, req, socket, head),
      );
      return { http, wss, WebSocket };
    })();
    return wire;
  }

  /** A svcd.sock connection (paused until the HTTP side is loaded). */
  function onLocalConnection(socket: Socket): void {
    loadWire().then(
      (w) => {
        if (stopped) {
          socket.destroy();
          return;
        }
        w.http.emit('connection', socket);
        socket.resume();
      },
      (e) => {
        log.error({ err: e }, 'cannot load the attach WebSocket server');
        socket.destroy();
      },
    );
  }

  function onUpgrade(wss: WebSocketServer, req: IncomingMessage, socket: Duplex, head: Buffer): void {
    const url = new URL(req.url ?? '/', 'http://svcd.sock');
    if (url.pathname !== LOCAL_ATTACH_PATH || stopped) {
      socket.end('HTTP/1.1 404 Not Found\r\nConnection: close\r\n\r\n');
      return;
    }
    wss.handleUpgrade(req, socket, head, (ws) => {
      const agent = url.searchParams.get('agent') ?? '';
      const size = parseSizeQuery(url.searchParams);
      attachViewer(ws, agent, {
        id: `local-${randomBytes(6).toString('hex')}`,
        via: 'local',
        who: url.searchParams.get('who')?.slice(0, 100) || 'local',
        readOnly: size.readOnly,
        cols: size.cols,
        rows: size.rows,
      });
    });
  }

  /** attach.open from the tower: verify, dial back, attach (or answer the error on the stream). */
  function onAttachOpen(m: AttachOpen): void {
    if (stopped || typeof m.stream_id !== 'string' || !/^[A-Za-z0-9_-]{8,100}$/.test(m.stream_id)) return;
    const now = ctx.clock.now();
    for (const [id, at] of seenStreams) if (now - at > 120_000) seenStreams.delete(id);
    if (seenStreams.has(m.stream_id)) return;
    seenStreams.set(m.stream_id, now);
    Promise.all([import('../../protocol/attach-signature.js'), loadWire()]).then(
      ([{ checkAttachOpen }, w]) => {
        if (!stopped) dialBack(m, checkAttachOpen(ctx.control.attachSecret, m, now), w.WebSocket);
      },
      (e) => log.error({ err: e, stream: m.stream_id }, 'cannot load the attach dial-back'),
    );
  }

  function dialBack(
    m: AttachOpen,
    bad: { code: ErrorCode; message: string } | null,
    WebSocketClass: typeof WebSocket,
  ): void {
    const url = `${ctx.tower.baseUrl.replace(/^http/, 'ws').replace(/\/$/, '')}${NODE_ATTACH_PREFIX}${m.stream_id}`;
    const ws = new WebSocketClass(url, {
      headers: { authorization: `Bearer ${ctx.identity.jwt}` },
      handshakeTimeout: 10_000,
      maxPayload: MAX_FRAME_BYTES,
    });
    towerSockets.add(ws);
    ws.on('close', () => towerSockets.delete(ws));
    ws.on('error', (e) => log.warn({ err: e, stream: m.stream_id }, 'attach dial-back failed'));
    ws.on('open', () => {
      if (bad) {
        log.warn({ stream: m.stream_id, code: bad.code }, 'attach.open refused');
        refuse(ws, bad.code, bad.message);
        return;
      }
      attachViewer(ws, String(m.agent_id), {
        id: m.stream_id,
        via: 'tower',
        who: typeof m.who === 'string' ? m.who.slice(0, 200) : 'tower',
        readOnly: m.read_only === true,
        cols: m.cols,
        rows: m.rows,
      });
    });
  }

  let offOpen: (() => void) | null = null;

  return {
    name: 'attach',
    session: (id) => sessions.get(id) ?? null,
    async list(): Promise<AttachListResult> {
      const agents = source.listAgents();
      const sizes = await Promise.all(
        agents.map(async (a) => {
          const t = source.terminal(a.id) ?? sessions.get(a.id)?.terminal;
          if (t) return { cols: t.cols, rows: t.rows };
          if (a.runtime === 'mux_hosted' && a.tmux && a.state === 'running')
            return tmuxWindowSize(a.tmux, ctx.env);
          return null;
        }),
      );
      const items = agents
        .map((a, i) => ({ a, size: sizes[i] }))
        .filter((x): x is { a: (typeof agents)[number]; size: { cols: number; rows: number } } => !!x.size)
        .map(({ a, size }) => {
          const s = sessions.get(a.id);
          return {
            agent_id: a.id,
            cols: size.cols,
            rows: size.rows,
            viewers: (s?.list() ?? []).map((v) => ({
              id: v.id,
              via: v.via,
              who: v.who,
              read_only: v.readOnly,
              since: new Date(v.since).toISOString(),
            })),
          };
        });
      return { items };
    },
    async start() {
      listener = await listenUnix(ctx.paths.svcdSock, onLocalConnection, { pauseOnConnect: true });
      offOpen = ctx.control.on('attach.open', onAttachOpen);
    },
    async stop() {
      if (stopped) return;
      stopped = true;
      offOpen?.();
      offTerminal();
      for (const s of sessions.values()) {
        s.end(
          { type: 'error', code: 'unavailable', message: 'svcd is stopping; attach again once it is back' },
          1001,
        );
      }
      sessions.clear();
      for (const client of muxClients.values()) client.hangUp();
      muxClients.clear();
      for (const ws of towerSockets) if (ws.readyState === ws.CONNECTING) ws.terminate();
      await listener?.close();
      (await wire?.catch(() => null))?.wss.close();
    },
    status: () => ({
      sessions: sessions.size,
      viewers: [...sessions.values()].reduce((n, s) => n + s.list().length, 0),
    }),
  };
}

interface Wire {
  http: Server;
  wss: WebSocketServer;
  WebSocket: typeof WebSocket;
}

function toBuffer(data: WebSocket.RawData): Buffer {
  if (Buffer.isBuffer(data)) return data;
  if (Array.isArray(data)) return Buffer.concat(data);
  return Buffer.from(data);
}
