// Raw WebSocket clients of the tower that tests share: a node's control channel opened by
// hand (hello, then the welcome), and an attach viewer collecting terminal bytes and control
// frames.
import WebSocket from 'ws';
import { CONTROL_PATH } from '../../src/protocol/control.js';

/** Opens a node control channel to `base` (http URL) and says hello; resolves once welcomed. */
export async function openNodeChannel(
  base: string,
  jwt: string,
  secret = 'c'.repeat(64),
): Promise<WebSocket> {
  const ws = new WebSocket(`${base.replace(/^http/, 'ws')}${CONTROL_PATH}`, {
    headers: { authorization: `Bearer ${jwt}` },
  });
  await new Promise((res, rej) => {
    ws.once('open', res);
    ws.once('error', rej);
  });
  ws.send(JSON.stringify({ type: 'hello', version: 'test', attach_secret: secret }));
  await new Promise((res) => ws.once('message', res));
  return ws;
}

export interface AttachViewer {
  ws: WebSocket;
  /** Terminal bytes received so far, as text. */
  out(): string;
  /** Text (control) frames received so far. */
  frames: Record<string, unknown>[];
  closed: Promise<number>;
}

/** Opens an attach viewer WebSocket at `url`; resolves once open. */
export function attachViewer(url: string, headers: Record<string, string> = {}): Promise<AttachViewer> {
  const ws = new WebSocket(url, { headers });
  let out = '';
  const frames: Record<string, unknown>[] = [];
  ws.on('message', (d, bin) => {
    if (bin) out += d.toString();
    else frames.push(JSON.parse(d.toString()) as Record<string, unknown>);
  });
  const closed = new Promise<number>((r) => ws.once('close', (code) => r(code)));
  return new Promise((resolve, reject) => {
    ws.once('open', () => resolve({ ws, out: () => out, frames, closed }));
    ws.once('error', reject);
  });
}
