// Pipes two WebSockets both ways, frame for frame (binary stays binary, text stays text), with
// backpressure: a direction stops reading its source while more than FLOW_HIGH_BYTES it
// forwarded are not yet written out, and reads again below FLOW_LOW_BYTES. So a slow viewer
// slows only its own stream (the node, seeing TCP backpressure, skips or re-syncs it) and the
// tower's memory per stream stays bounded. Closing either side closes the other. Text frames
// are control messages: each side's are decoded before they are forwarded, and one that does
// not decode closes its sender with 1008 (and so the stream).
import WebSocket from 'ws';
import { FLOW_HIGH_BYTES, FLOW_LOW_BYTES } from '../protocol/attach.js';

export function pipeSockets(
  a: WebSocket,
  b: WebSocket,
  onClose: (code: number, reason: string) => void,
  /** A last text frame for `a` when `b` closed abnormally (so `a` learns why), or null. */
  lastWord: (code: number, reason: string) => string | null = () => null,
  /** Judges each side's text frames: null to forward, else why the sender is closed. */
  decode: { a?: TextCheck; b?: TextCheck; onInvalid?(side: 'a' | 'b', why: string): void } = {},
): void {
  let closed = false;
  const close = (to: WebSocket, code: number, reason: Buffer) => {
    if (closed) return;
    closed = true;
    // 1005 (no status) and 1006 (abnormal) may not be sent in a close frame.
    const c = code === 1005 ? 1000 : code === 1006 ? 1011 : code;
    const word = to === a && !NORMAL_CLOSE.has(c) && c < 4000 ? lastWord(code, reason.toString()) : null;
    if (to.readyState === WebSocket.OPEN) {
      if (word !== null) to.send(word);
      to.close(c, reason);
    } else if (to.readyState === WebSocket.CONNECTING) to.close(c, reason);
    onClose(c, reason.toString());
  };
  const invalid = (side: 'a' | 'b') => (why: string) => decode.onInvalid?.(side, why);
  forward(a, b, decode.a, invalid('a'));
  forward(b, a, decode.b, invalid('b'));
  a.on('close', (code, reason) => close(b, code, reason));
  b.on('close', (code, reason) => close(a, code, reason));
  a.on('error', () => a.terminate());
  b.on('error', () => b.terminate());
  a.resume();
  b.resume();
}

/** Closes after which the other side has nothing to explain (1000 normal, 1001 going away, 4xxx: an error frame was sent). */
const NORMAL_CLOSE = new Set([1000, 1001]);

type TextCheck = (text: string) => string | null;

function forward(
  from: WebSocket,
  to: WebSocket,
  check: TextCheck | undefined,
  onInvalid: (why: string) => void,
): void {
  let pending = 0;
  let paused = false;
  from.on('message', (data: WebSocket.RawData, isBinary: boolean) => {
    if (to.readyState !== WebSocket.OPEN || from.readyState !== WebSocket.OPEN) return;
    const buf = Buffer.isBuffer(data) ? data : Array.isArray(data) ? Buffer.concat(data) : Buffer.from(data);
    const why = !isBinary && check ? check(buf.toString('utf8')) : null;
    if (why !== null) {
      onInvalid(why);
      from.close(1008, why.slice(0, 120));
      return;
    }
    pending += buf.length;
    to.send(buf, { binary: isBinary }, () => {
      pending -= buf.length;
      if (paused && pending < FLOW_LOW_BYTES) {
        paused = false;
        from.resume();
      }
    });
    if (!paused && pending > FLOW_HIGH_BYTES) {
      paused = true;
      from.pause();
    }
  });
}
