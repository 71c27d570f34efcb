import { describe, expect, it } from 'vitest';
import { waitFor } from '../../test/support/poll.js';
import { readSse, type SseEvent } from './sse-reader.js';

/** A body that delivers `chunks` one by one (as bytes), then ends (or stays open). */
function body(
  chunks: (string | Uint8Array)[],
  end: 'close' | 'stay-open' = 'close',
): ReadableStream<Uint8Array> & { cancelled: boolean } {
  let i = 0;
  const state = { cancelled: false };
  const stream = new ReadableStream<Uint8Array>({
    pull(c) {
      const next = chunks[i++];
      if (next !== undefined) c.enqueue(typeof next === 'string' ? new TextEncoder().encode(next) : next);
      else if (end === 'close') c.close();
    },
    cancel() {
      state.cancelled = true;
    },
  });
  return Object.defineProperty(stream, 'cancelled', {
    get: () => state.cancelled,
  }) as ReadableStream<Uint8Array> & {
    cancelled: boolean;
  };
}

async function readAll(chunks: string[]): Promise<SseEvent[]> {
  const got: SseEvent[] = [];
  const end = await readSse(body(chunks), {
    event(ev) {
      got.push(ev);
      return true;
    },
  });
  expect(end).toBe('ended');
  return got;
}

/** The same stream with every line end written as `eol`. */
const STREAM = [
  ': keep-alive',
  '',
  'retry: 1000',
  '',
  'id: 1',
  'data: {"a":1}',
  '',
  'id: 2',
  'event: reset',
  'data: {"b":',
  'data: 2}',
  '',
  'data: no id',
  '',
  '',
];
const EXPECTED: SseEvent[] = [
  { name: 'message', id: '1', data: '{"a":1}' },
  { name: 'reset', id: '2', data: '{"b":\n2}' },
  { name: 'message', id: null, data: 'no id' },
];
const EOLS = { LF: '\n', CR: '\r', CRLF: '\r\n' } as const;

describe('readSse', () => {
  it.each(Object.entries(EOLS))('reads a stream whose lines end with %s', async (_name, eol) => {
    expect(await readAll([STREAM.join(eol)])).toEqual(EXPECTED);
  });

  it.each(Object.entries(EOLS))('reads a %s stream cut into chunks at every byte', async (_name, eol) => {
    const text = STREAM.join(eol);
    expect(await readAll([...text])).toEqual(EXPECTED);
  });

  it('reads lines whose ends mix LF, CR and CRLF', async () => {
    expect(await readAll(['id: 1\r\ndata: x\r\rdata: y\n\nevent: e\rdata: z\r\n\r\n'])).toEqual([
      { name: 'message', id: '1', data: 'x' },
      { name: 'message', id: null, data: 'y' },
      { name: 'e', id: null, data: 'z' },
    ]);
  });

  it('treats a CR and a LF in the next chunk as one line end', async () => {
    expect(await readAll(['data: x\r', '\n', 'data: y\r', '\ndata: z\r', '\n\r', '\n'])).toEqual([
      { name: 'message', id: null, data: 'x\ny\nz' },
    ]);
  });

  it('hands over an event of a CR-only stream without waiting for the next bytes', async () => {
    let source!: ReadableStreamDefaultController<Uint8Array>;
    const stream = new ReadableStream<Uint8Array>({
      start(c) {
        source = c;
      },
    });
    const send = (text: string) => source.enqueue(new TextEncoder().encode(text));
    const got: string[] = [];
    const done = readSse(stream, {
      event(ev) {
        got.push(ev.data);
        return true;
      },
    });
    send('data: first\r\r');
    // Nothing more is sent until the first event is through.
    await waitFor('the first event', () => got.length === 1);
    send('data: second\r\r');
    source.close();
    expect(await done).toBe('ended');
    expect(got).toEqual(['first', 'second']);
  });

  it('decodes UTF-8 split across chunks', async () => {
    const bytes = new TextEncoder().encode('data: é€\n\n');
    const got: string[] = [];
    await readSse(body([bytes.slice(0, 7), bytes.slice(7, 9), bytes.slice(9)]), {
      event(ev) {
        got.push(ev.data);
        return true;
      },
    });
    expect(got).toEqual(['é€']);
  });

  it('drops an event the stream ends before its blank line', async () => {
    expect(await readAll(['data: complete\n\ndata: cut off\n'])).toEqual([
      { name: 'message', id: null, data: 'complete' },
    ]);
  });

  it('stops at the handler’s false and cancels the body', async () => {
    const b = body(['data: 1\n\ndata: 2\n\n', 'data: 3\n\n'], 'stay-open');
    const got: string[] = [];
    const end = await readSse(b, {
      event(ev) {
        got.push(ev.data);
        return ev.data !== '1';
      },
    });
    expect(end).toBe('stopped');
    expect(got).toEqual(['1']);
    await waitFor('the body cancelled', () => b.cancelled);
  });

  it('reports every chunk, keep-alive comments included', async () => {
    let chunks = 0;
    await readSse(body([': keep-alive\n\n', ': keep-alive\n\n', 'data: x\n\n']), {
      event: () => true,
      chunk: () => {
        chunks++;
      },
    });
    expect(chunks).toBe(3);
  });

  it('rejects with a handler’s error and cancels the body', async () => {
    const b = body(['data: not json\n\n'], 'stay-open');
    await expect(readSse(b, { event: (ev) => JSON.parse(ev.data) as boolean })).rejects.toThrow(SyntaxError);
    await waitFor('the body cancelled', () => b.cancelled);
  });

  it('rejects with the body’s error', async () => {
    const stream = new ReadableStream<Uint8Array>({
      start(c) {
        c.enqueue(new TextEncoder().encode('data: x\n\n'));
        c.error(new Error('connection reset'));
      },
    });
    await expect(readSse(stream, { event: () => true })).rejects.toThrow('connection reset');
  });
});
