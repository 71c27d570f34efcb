// One secrets.sock connection: read one JSON request (ended by a newline, by the client
// half-closing, or by the object being complete), answer once, close. Input is capped in
// size and time; past either the client gets bad_request and its further bytes are
// discarded. The request text is dropped as soon as it is decoded.
import type { Socket } from 'node:net';
import type { TimerHandle } from '../../lib/clock.js';
import type { BrokerReply } from '../../protocol/secrets.js';

export interface ConnectionOptions {
  maxRequestBytes: number;
  /** From accept to a complete request. */
  requestTimeoutMs: number;
  /** After the reply, how long a client that keeps the socket open is given to close it. */
  lingerMs: number;
  setTimeout(fn: () => void, ms: number): TimerHandle;
  /** Answers a decoded request; `undefined` never reaches it (decode errors are handled here). */
  answer(decoded: unknown): Promise<BrokerReply>;
  /** Called once per connection with the reply's outcome, for counters. */
  onReply?(reply: BrokerReply): void;
}

const badRequest = (message: string): BrokerReply => ({ ok: false, error: { code: 'bad_request', message } });

export function serveConnection(socket: Socket, opts: ConnectionOptions): void {
  let chunks: Buffer[] = [];
  let size = 0;
  let state: 'reading' | 'answering' | 'replied' = 'reading';
  let timer: TimerHandle | null = opts.setTimeout(() => {
    if (state === 'reading') {
      reply(
        badRequest(
          `no complete request within ${opts.requestTimeoutMs} ms: send one JSON object and a newline`,
        ),
      );
    } else {
      socket.destroy();
    }
  }, opts.requestTimeoutMs);

  const clearTimer = () => {
    timer?.cancel();
    timer = null;
  };

  function reply(r: BrokerReply): void {
    if (state === 'replied') return;
    state = 'replied';
    chunks = [];
    clearTimer();
    opts.onReply?.(r);
    if (socket.destroyed || !socket.writable) {
      socket.destroy();
      return;
    }
    socket.end(`${JSON.stringify(r)}\n`);
    // Keep reading (and discarding) so a client still writing sees the reply, not a reset;
    // a client that never closes is cut off after the linger time.
    timer = opts.setTimeout(() => socket.destroy(), opts.lingerMs);
  }

  function decodeAndAnswer(bytes: Buffer): void {
    state = 'answering';
    chunks = [];
    let decoded: unknown;
    const text = bytes.toString('utf8').trim();
    if (text === '') {
      reply(badRequest('empty request: send {"op":"get","session":…,"name":…}'));
      return;
    }
    try {
      decoded = JSON.parse(text);
    } catch {
      reply(badRequest('request is not valid JSON: send one object {"op":"get","session":…,"name":…}'));
      return;
    }
    opts.answer(decoded).then(reply, () => reply(badRequest('request could not be answered')));
  }

  socket.on('data', (chunk: Buffer) => {
    if (state !== 'reading') return;
    const nl = chunk.indexOf(0x0a);
    const take = nl >= 0 ? chunk.subarray(0, nl) : chunk;
    size += take.length;
    if (size > opts.maxRequestBytes) {
      reply(badRequest(`request larger than ${opts.maxRequestBytes} bytes`));
      return;
    }
    chunks.push(take);
    if (nl >= 0) {
      decodeAndAnswer(Buffer.concat(chunks));
      return;
    }
    // Clients that neither send a newline nor half-close: answer once the object is whole.
    if (take.length > 0 && lastNonSpace(take) === 0x7d) {
      const all = Buffer.concat(chunks);
      if (isCompleteJson(all)) decodeAndAnswer(all);
    }
  });
  socket.on('end', () => {
    // After a reply, both sides have ended and the socket closes by itself.
    if (state === 'reading') decodeAndAnswer(Buffer.concat(chunks));
  });
  socket.on('error', () => socket.destroy());
  socket.on('close', () => {
    clearTimer();
    chunks = [];
  });
}

function lastNonSpace(b: Buffer): number {
  for (let i = b.length - 1; i >= 0; i--) {
    const c = b[i]!;
    if (c !== 0x20 && c !== 0x09 && c !== 0x0d) return c;
  }
  return -1;
}

function isCompleteJson(b: Buffer): boolean {
  try {
    JSON.parse(b.toString('utf8'));
    return true;
  } catch {
    return false;
  }
}
