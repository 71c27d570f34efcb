// One attachable agent terminal and its viewers. Keeps the screen in a headless xterm (scrollback
// capped) so a viewer that joins — or comes back after a refresh — first gets the current screen
// and scrollback, then the live bytes. Flow control: the PTY is paused while the headless
// terminal is behind, or while every viewer is behind (so a sole viewer loses no byte); a viewer
// far behind while others keep up is skipped and re-synced from the screen state, so a slow
// viewer never stalls the agent or the others and memory stays bounded.
// Viewers talk through ViewerPort (a WebSocket in practice): no sockets here.

import { createRequire } from 'node:module';
import type * as XtermSerialize from '@xterm/addon-serialize';
import type * as XtermHeadless from '@xterm/headless';
import {
  type ErrorFrame,
  type ExitFrame,
  FLOW_HIGH_BYTES,
  FLOW_LAG_CAP_BYTES,
  FLOW_LOW_BYTES,
  parseViewerFrame,
} from '../../protocol/attach.js';
import type { AgentTerminal } from '../process/terminal.js';

// The headless xterm is loaded with the first PTY session, not at svcd's start: a node
// without PTY agents never pays its memory. (Both packages are CommonJS: require is sync.)
const require = createRequire(import.meta.url);
let xterm: {
  Terminal: typeof XtermHeadless.Terminal;
  SerializeAddon: typeof XtermSerialize.SerializeAddon;
} | null = null;
function loadXterm() {
  xterm ??= {
    Terminal: (require('@xterm/headless') as typeof XtermHeadless).Terminal,
    SerializeAddon: (require('@xterm/addon-serialize') as typeof XtermSerialize).SerializeAddon,
  };
  return xterm;
}

export const SCROLLBACK_LINES = 1000;
/** Full reset (RIS) sent before a screen snapshot, so the viewer's terminal starts clean. */
const RESET = '\x1bc';

/** What a session needs of a viewer's connection. */
export interface ViewerPort {
  /** Sends a frame; cb runs once the bytes left this process (or failed). */
  send(data: Buffer | string, cb: (err?: Error) => void): void;
  close(code: number, reason: string): void;
}

export interface ViewerOptions {
  id: string;
  via: 'local' | 'tower';
  who: string;
  readOnly: boolean;
  cols: number;
  rows: number;
  /** ms since epoch. */
  since: number;
}

export interface Viewer extends ViewerOptions {
  readonly port: ViewerPort;
  /** Bytes sent but not yet written out. */
  pending: number;
  /** Got its snapshot and receives live bytes. */
  ready: boolean;
  /** Skipped until it drains, then re-synced. */
  lagging: boolean;
  /** Live chunks that arrived while its snapshot was being prepared. */
  queue: Buffer[];
  closed: boolean;
}

export class TerminalSession {
  private readonly screen: XtermHeadless.Terminal;
  private readonly serializer: XtermSerialize.SerializeAddon;
  private readonly viewers = new Map<string, Viewer>();
  private headlessPending = 0;
  private paused = false;
  private lastWriter: Viewer | null = null;
  private ended = false;
  // No-ops until subscribed: a terminal that has already exited calls the exit listener from
  // within onExit(), so end() runs before the constructor has stored what onExit() returns.
  private offData: () => void = () => {};
  private offExit: () => void = () => {};

  constructor(
    readonly terminal: AgentTerminal,
    private readonly hooks: { onViewerClosed?(v: Viewer): void } = {},
  ) {
    const { Terminal, SerializeAddon } = loadXterm();
    this.screen = new Terminal({
      cols: terminal.cols,
      rows: terminal.rows,
      scrollback: SCROLLBACK_LINES,
      allowProposedApi: true,
    });
    this.serializer = new SerializeAddon();
    this.screen.loadAddon(this.serializer);
    this.offData = terminal.onData((chunk) => this.onOutput(chunk));
    this.offExit = terminal.onExit((e) => this.end({ type: 'exit', code: e.code, signal: e.signal }));
  }

  get agentId(): string {
    return this.terminal.agentId;
  }

  get isEnded(): boolean {
    return this.ended;
  }

  list(): Viewer[] {
    return [...this.viewers.values()];
  }

  /** Adds a viewer: it gets the screen, then live output. A writer's size applies if it leads. */
  attach(port: ViewerPort, o: ViewerOptions): Viewer {
    const v: Viewer = { ...o, port, pending: 0, ready: false, lagging: false, queue: [], closed: false };
    if (this.ended) {
      port.close(1000, 'agent exited');
      v.closed = true;
      return v;
    }
    this.viewers.set(v.id, v);
    if (!v.readOnly && (this.lastWriter === null || this.lastWriter.closed)) this.applySize(v);
    this.resync(v);
    return v;
  }

  /** A frame from a viewer: binary = input, text = control. */
  fromViewer(v: Viewer, data: Buffer, isBinary: boolean): void {
    if (v.closed || this.ended) return;
    if (!isBinary) {
      const f = parseViewerFrame(data.toString('utf8'));
      if (!f || v.readOnly) return;
      v.cols = f.cols;
      v.rows = f.rows;
      // Resize follows the last active writer, so two writers never fight over the size.
      if (this.lastWriter === null || this.lastWriter === v || this.lastWriter.closed) this.applySize(v);
      return;
    }
    if (v.readOnly) return;
    if (this.lastWriter !== v) {
      this.lastWriter = v;
      this.applySize(v);
    }
    this.terminal.write(data);
  }

  /** The viewer's connection closed. */
  detach(v: Viewer): void {
    if (v.closed) return;
    v.closed = true;
    v.queue = [];
    this.viewers.delete(v.id);
    if (this.lastWriter === v) this.lastWriter = null;
    this.hooks.onViewerClosed?.(v);
    this.maybeResume();
  }

  /** Ends the session: every viewer gets the frame and is closed. */
  end(frame: ExitFrame | ErrorFrame, closeCode = 1000): void {
    if (this.ended) return;
    this.ended = true;
    this.offData();
    this.offExit();
    if (this.paused) this.terminal.resume();
    const text = JSON.stringify(frame);
    for (const v of [...this.viewers.values()]) {
      v.port.send(text, () => {});
      v.port.close(closeCode, frame.type === 'exit' ? 'agent exited' : frame.message.slice(0, 100));
      this.detach(v);
    }
    this.screen.dispose();
  }

  private applySize(v: Viewer): void {
    if (v.cols === this.terminal.cols && v.rows === this.terminal.rows) return;
    this.terminal.resize(v.cols, v.rows);
    this.screen.resize(this.terminal.cols, this.terminal.rows);
  }

  private onOutput(chunk: Buffer): void {
    this.headlessPending += chunk.length;
    this.screen.write(chunk, () => {
      this.headlessPending -= chunk.length;
      this.maybeResume();
    });
    for (const v of this.viewers.values()) {
      if (v.lagging) continue;
      if (!v.ready) {
        v.queue.push(chunk);
        continue;
      }
      this.sendTo(v, chunk);
      if (v.pending > FLOW_LAG_CAP_BYTES) v.lagging = true;
    }
    this.maybePause();
  }

  private sendTo(v: Viewer, data: Buffer): void {
    v.pending += data.length;
    v.port.send(data, () => {
      v.pending -= data.length;
      if (v.closed) return;
      if (v.lagging && v.pending < FLOW_LOW_BYTES) this.resync(v);
      this.maybeResume();
    });
  }

  /** Sends the viewer the screen as of now, then what arrives after. */
  private resync(v: Viewer): void {
    v.ready = false;
    v.lagging = false;
    v.queue = [];
    // The callback runs once the headless terminal has parsed every byte written before this
    // call and before any written after: the snapshot matches the stream exactly.
    this.screen.write('', () => {
      if (v.closed || this.ended) return;
      this.sendTo(v, Buffer.from(RESET + this.serializer.serialize(), 'utf8'));
      const queued = v.queue;
      v.queue = [];
      v.ready = true;
      for (const c of queued) this.sendTo(v, c);
      this.maybePause();
    });
  }

  private live(): Viewer[] {
    return [...this.viewers.values()].filter((v) => v.ready && !v.lagging);
  }

  private maybePause(): void {
    if (this.paused || this.ended) return;
    const live = this.live();
    const viewersBehind = live.length > 0 && live.every((v) => v.pending > FLOW_HIGH_BYTES);
    if (this.headlessPending > FLOW_HIGH_BYTES || viewersBehind) {
      this.paused = true;
      this.terminal.pause();
    }
  }

  private maybeResume(): void {
    if (!this.paused || this.ended) return;
    if (this.headlessPending >= FLOW_LOW_BYTES) return;
    const live = this.live();
    if (live.length > 0 && !live.some((v) => v.pending < FLOW_LOW_BYTES)) return;
    this.paused = false;
    this.terminal.resume();
  }
}
