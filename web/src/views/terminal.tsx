// An agent's terminal in the browser: xterm.js over /api/attach-ws with a single-use ticket
// (POST /api/attach-tickets; browsers cannot send Authorization on a WebSocket). Resizes the
// agent's PTY with the window, a read-only toggle (a new ticket: the node enforces it), and a
// plain message when the node is offline or the session ends.
import { useEffect, useRef, useState } from 'preact/hooks';
import type { AttachTicket } from '../../../src/protocol/attach.js';
import type { Agent } from '../../../src/protocol/mesh.js';
import type { Node } from '../../../src/protocol/nodes.js';
import { ApiError, api, errorText } from '../api.js';
import { CopyButton } from '../ui.js';

/** Terminal bytes per WebSocket frame, as svcd and svc attach send them (protocol/attach.ts). */
const FRAME_BYTES = 32 * 1024;

type Term = import('@xterm/xterm').Terminal;

// A line height above 1 keeps the underscore inside its cell: at 1.0 the cell is cut just
// above the glyph's descent in common monospace fonts, and `x86_64` reads `x86 64`.
const FONT = {
  family: '"DejaVu Sans Mono", "Liberation Mono", ui-monospace, Menlo, Consolas, monospace',
  size: 14,
  lineHeight: 1.2,
};

/** What a close means to the user, from the last control frame or the close code. */
function endMessage(
  frame: { type?: string; code?: unknown; message?: unknown } | null,
  code: number,
): string {
  if (frame?.type === 'exit')
    return `The agent exited${frame.code !== null ? ` with code ${String(frame.code)}` : ''}.`;
  if (frame?.type === 'error') return `${String(frame.message)} (${String(frame.code)})`;
  if (code === 1000) return 'The session ended.';
  return `The connection to the tower was lost (close code ${code}).`;
}

export function TerminalView(props: { agent: string }) {
  const box = useRef<HTMLDivElement>(null);
  const leave = useRef<HTMLButtonElement>(null);
  const term = useRef<Term | null>(null);
  const ws = useRef<WebSocket | null>(null);
  const [agent, setAgent] = useState<Agent | null>(null);
  const [node, setNode] = useState<Node | null>(null);
  const [readOnly, setReadOnly] = useState(false);
  const [status, setStatus] = useState<{ text: string; bad?: boolean }>({ text: 'Loading…' });
  // Bumped by Reconnect: reloads the agent and node, which opens a new session.
  const [reload, setReload] = useState(0);
  const [ready, setReady] = useState(false);
  // The agent is not enrolled (or not visible to this token): no terminal, a message instead.
  const [missing, setMissing] = useState<string | null>(null);
  const readOnlyRef = useRef(readOnly);
  readOnlyRef.current = readOnly;

  // Who is the agent, where does it run, is that node online?
  useEffect(() => {
    let live = true;
    (async () => {
      try {
        const a = await api<Agent>('GET', `/agents/${encodeURIComponent(props.agent)}`);
        const n = await api<Node>('GET', `/nodes/${encodeURIComponent(a.node_id)}`);
        if (!live) return;
        setAgent(a);
        setNode(n);
        if (!n.online)
          setStatus({
            text: `Node ${n.hostname} is offline: its svcd is not connected to the tower, so this terminal cannot open. Start svcd on it (svc daemon up), then press Reconnect.`,
            bad: true,
          });
      } catch (e) {
        if (!live) return;
        if (e instanceof ApiError && (e.status === 404 || e.code.endsWith('not_found'))) {
          setMissing(props.agent);
          setStatus({ text: '' });
        } else setStatus({ text: errorText(e), bad: true });
      }
    })();
    return () => {
      live = false;
    };
  }, [props.agent, reload]);

  // The terminal widget: made once, disposed when leaving the view.
  useEffect(() => {
    let disposed = false;
    let ro: ResizeObserver | null = null;
    (async () => {
      const { Terminal, fitSize } = await import('../xterm.js');
      if (disposed || !box.current) return;
      const t = new Terminal({
        fontFamily: FONT.family,
        fontSize: FONT.size,
        lineHeight: FONT.lineHeight,
        scrollback: 5000,
        cursorBlink: true,
      });
      t.open(box.current);
      term.current = t;
      // For tests and the curious: the xterm instance behind the widget (its buffer is public API).
      (box.current as HTMLElement & { xterm?: Term }).xterm = t;
      const fitToBox = () => {
        if (!box.current) return;
        const { cols, rows } = fitSize(box.current, FONT);
        if (cols !== t.cols || rows !== t.rows) t.resize(cols, rows);
      };
      fitToBox();
      ro = new ResizeObserver(fitToBox);
      ro.observe(box.current);
      t.onResize(({ cols, rows }) => {
        const s = ws.current;
        // A read-only viewer never resizes the agent's PTY (docs/attach.md).
        if (s?.readyState === WebSocket.OPEN && !readOnlyRef.current)
          s.send(JSON.stringify({ type: 'resize', cols, rows }));
      });
      // Every key goes to the agent, Tab included; Ctrl+] (the detach key of `svc attach`) moves
      // the focus back to the toolbar, so keyboard users are never trapped in the terminal.
      t.attachCustomKeyEventHandler((e) => {
        if (e.ctrlKey && (e.key === ']' || e.code === 'BracketRight')) {
          if (e.type === 'keydown') leave.current?.focus();
          return false;
        }
        return true;
      });
      const enc = new TextEncoder();
      t.onData((d) => {
        const s = ws.current;
        if (s?.readyState !== WebSocket.OPEN || readOnlyRef.current) return;
        // A large paste goes in frames the tower accepts (docs/api.md: 32 KiB per frame).
        const bytes = enc.encode(d);
        for (let i = 0; i < bytes.length; i += FRAME_BYTES) s.send(bytes.subarray(i, i + FRAME_BYTES));
      });
      setReady(true);
    })();
    return () => {
      disposed = true;
      ro?.disconnect();
      ws.current?.close();
      ws.current = null;
      term.current?.dispose();
      term.current = null;
    };
  }, []);

  // The session: a new ticket and socket whenever the agent, the mode or a reconnect asks.
  useEffect(() => {
    const t = term.current;
    if (!t || !agent || !node?.online) return;
    let closedByUs = false;
    let socket: WebSocket | null = null;
    (async () => {
      setStatus({ text: `Attaching to ${agent.name}${readOnly ? ' (read-only)' : ''}…` });
      t.options.disableStdin = readOnly;
      let ticket: AttachTicket;
      try {
        ticket = await api<AttachTicket>('POST', '/api/attach-tickets', {
          node: node.id,
          agent: agent.id,
          read_only: readOnly,
        });
      } catch (e) {
        setStatus({ text: errorText(e), bad: true });
        return;
      }
      if (closedByUs) return;
      const q = new URLSearchParams({ ticket: ticket.ticket, cols: String(t.cols), rows: String(t.rows) });
      socket = new WebSocket(
        `${location.protocol === 'https:' ? 'wss' : 'ws'}://${location.host}/api/attach-ws?${q}`,
      );
      socket.binaryType = 'arraybuffer';
      ws.current = socket;
      let last: { type?: string; code?: unknown; message?: unknown } | null = null;
      let attached = false;
      socket.onmessage = (m) => {
        if (typeof m.data === 'string') {
          try {
            last = JSON.parse(m.data) as typeof last;
          } catch {}
          return;
        }
        if (!attached) {
          attached = true;
          t.reset();
          setStatus({
            text: `Attached to ${agent.name} on ${node.hostname}${readOnly ? ' (read-only)' : ''}.`,
          });
          t.focus();
        }
        t.write(new Uint8Array(m.data as ArrayBuffer));
      };
      socket.onclose = (e) => {
        if (ws.current === socket) ws.current = null;
        if (closedByUs) return;
        const text = endMessage(last, e.code);
        const offline = (last as { code?: unknown } | null)?.code === 'node_offline';
        setStatus({ text: offline ? `Node ${node.hostname} is offline: ${text}` : text, bad: true });
      };
    })();
    return () => {
      closedByUs = true;
      socket?.close(1000);
    };
  }, [agent, node, readOnly, ready]);

  if (missing)
    return (
      <section class="terminal-view">
        <h2>Terminal</h2>
        <div class="card notice" role="alert" data-testid="terminal-missing">
          <h3>No such agent</h3>
          <p>
            No agent <span class="mono">{missing}</span> is enrolled on this tower, or this token may not see
            it, so there is no terminal to open.
          </p>
          <p>
            Pick an agent with a <strong>Terminal</strong> link on the <a href="#/nodes">Nodes</a> page (PTY
            agents have one).
          </p>
        </div>
      </section>
    );
  return (
    <section class="terminal-view">
      <h2>
        Terminal{agent ? `: ${agent.name}` : ''}{' '}
        {node && (
          <span class={node.online ? 'ok' : 'muted'}>
            {node.hostname} {node.online ? 'online' : 'offline'}
          </span>
        )}
      </h2>
      <div class="toolbar">
        <label>
          <input
            type="checkbox"
            checked={readOnly}
            onChange={(e) => setReadOnly((e.target as HTMLInputElement).checked)}
          />{' '}
          Read-only
        </label>
        <button type="button" ref={leave} onClick={() => setReload((n) => n + 1)}>
          Reconnect
        </button>
        <span class="muted">Keys go to the agent; Ctrl+] leaves the terminal.</span>
        <span class="muted mono" title="agent id">
          {props.agent} <CopyButton text={props.agent} label="Copy agent id" />
        </span>
      </div>
      <p
        hidden={status.text === ''}
        role={status.bad ? 'alert' : 'status'}
        class={status.bad ? 'error' : 'muted'}
        data-testid="terminal-status"
      >
        {status.text}
      </p>
      <div class="term" ref={box} data-testid="terminal" />
    </section>
  );
}
