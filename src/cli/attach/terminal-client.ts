// The viewer end of an attach stream in `svc attach`: the local terminal in raw mode, typed
// bytes to the agent (minus the detach key), terminal bytes to stdout with backpressure (the
// socket is paused while stdout is full), a resize on every SIGWINCH. The local terminal is
// restored on every way out: detach, agent exit, error, closed socket, SIGTERM/SIGHUP.
import type WebSocket from 'ws';
import { parseServerFrame, splitFrames } from '../../protocol/attach.js';
import { isErrorCode, SvcError } from '../../protocol/errors.js';
import { DetachKey } from './detach-key.js';

export interface AttachTty {
  stdin: NodeJS.ReadStream;
  stdout: NodeJS.WriteStream;
  /** Subscribes to terminal size changes (SIGWINCH); returns the unsubscribe. */
  onResize(fn: () => void): () => void;
  /** Subscribes to termination signals; returns the unsubscribe. */
  onTerminate(fn: (signal: string) => void): () => void;
}

export function processTty(): AttachTty {
  const on = (signals: NodeJS.Signals[], fn: (s: string) => void) => {
    const handlers = signals.map((s) => [s, () => fn(s)] as const);
    for (const [s, h] of handlers) process.on(s, h);
    return () => {
      for (const [s, h] of handlers) process.off(s, h);
    };
  };
  return {
    stdin: process.stdin,
    stdout: process.stdout,
    onResize: (fn) => on(['SIGWINCH'], fn),
    onTerminate: (fn) => on(['SIGTERM', 'SIGHUP'], fn),
  };
}

export type AttachOutcome =
  | { how: 'detached' }
  | { how: 'exit'; code: number | null; signal: string | null }
  | { how: 'closed'; reason: string };

export function terminalSize(tty: AttachTty): { cols: number; rows: number } {
  return { cols: tty.stdout.columns || 80, rows: tty.stdout.rows || 24 };
}

/** Waits for the socket to open; a refused upgrade becomes an SvcError. */
export function opened(ws: WebSocket, where: string): Promise<void> {
  return new Promise((resolve, reject) => {
    ws.once('open', () => resolve());
    ws.once('unexpected-response', (_req, res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (d: string) => {
        body += d;
      });
      res.on('end', () => {
        let code: string | undefined;
        let detail = body.slice(0, 300);
        try {
          const p = JSON.parse(body) as { code?: string; detail?: string };
          code = p.code;
          detail = p.detail ?? detail;
        } catch {
          // not problem+json
        }
        reject(
          new SvcError(
            isErrorCode(code) ? code : res.statusCode === 401 ? 'unauthenticated' : 'unavailable',
            `${where} refused the attach (HTTP ${res.statusCode}): ${detail}`,
          ),
        );
      });
    });
    ws.once('error', (e: NodeJS.ErrnoException) =>
      reject(new SvcError('unavailable', `cannot connect to ${where}: ${e.code ?? e.message}`)),
    );
  });
}

/** Runs an open attach stream until detach, exit or close. */
export function runAttach(
  ws: WebSocket,
  tty: AttachTty,
  opts: { readOnly: boolean },
): Promise<AttachOutcome> {
  const { stdin, stdout } = tty;
  const raw = stdin.isTTY === true;
  const detachKey = new DetachKey();
  const cleanups: (() => void)[] = [];
  const restore = () => {
    if (raw) stdin.setRawMode(false);
  };
  // Even a crash leaves the terminal usable.
  process.once('exit', restore);
  cleanups.push(() => process.off('exit', restore));

  return new Promise<AttachOutcome>((resolve, reject) => {
    let done = false;
    const finish = (r: { ok: AttachOutcome } | { err: unknown }) => {
      if (done) return;
      done = true;
      for (const c of cleanups.reverse()) c();
      restore();
      stdin.pause();
      if (ws.readyState === ws.OPEN || ws.readyState === ws.CONNECTING) ws.close(1000, 'detached');
      if ('ok' in r) resolve(r.ok);
      else reject(r.err);
    };

    if (raw) stdin.setRawMode(true);
    const onInput = (chunk: Buffer) => {
      const { forward, detach } = detachKey.feed(chunk);
      // A paste can be bigger than one frame the tower accepts.
      if (forward.length > 0 && !opts.readOnly && ws.readyState === ws.OPEN)
        for (const f of splitFrames(forward)) ws.send(f, { binary: true });
      if (detach) finish({ ok: { how: 'detached' } });
    };
    stdin.on('data', onInput);
    stdin.resume();
    cleanups.push(() => stdin.off('data', onInput));

    const sendSize = () => {
      if (ws.readyState === ws.OPEN) ws.send(JSON.stringify({ type: 'resize', ...terminalSize(tty) }));
    };
    cleanups.push(tty.onResize(sendSize));
    cleanups.push(tty.onTerminate((s) => finish({ ok: { how: 'closed', reason: `${s} received` } })));
    sendSize();

    const onDrain = () => ws.resume();
    stdout.on('drain', onDrain);
    cleanups.push(() => stdout.off('drain', onDrain));
    ws.on('message', (data: WebSocket.RawData, isBinary: boolean) => {
      const buf = Buffer.isBuffer(data)
        ? data
        : Array.isArray(data)
          ? Buffer.concat(data)
          : Buffer.from(data);
      if (isBinary) {
        if (!stdout.write(buf)) ws.pause();
        return;
      }
      const f = parseServerFrame(buf.toString('utf8'));
      if (f?.type === 'exit') finish({ ok: { how: 'exit', code: f.code, signal: f.signal ?? null } });
      else if (f?.type === 'error')
        finish({ err: new SvcError(isErrorCode(f.code) ? f.code : 'unavailable', f.message) });
    });
    ws.on('close', (code: number, reason: Buffer) =>
      finish({ ok: { how: 'closed', reason: reason.toString() || `connection closed (${code})` } }),
    );
    ws.on('error', (e: Error) =>
      finish({ err: new SvcError('unavailable', `attach stream failed: ${e.message}`) }),
    );
  });
}
