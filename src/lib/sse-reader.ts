// Reads a Server-Sent Events body (a fetch Response's) with eventsource-parser: the one SSE
// reader of svcd's fan-out upstream, `svc feed` and the console (web/ bundles this file, so it
// uses only what browsers have too). CR, LF and CRLF all end a line, as the format allows.
import { createParser } from 'eventsource-parser';

export interface SseEvent {
  /** The `event:` field; 'message' when the event has none. */
  name: string;
  /** The event's own `id:` field, null when it has none. */
  id: string | null;
  data: string;
}

export interface SseHandlers {
  /** Each event with data, in order; returning false stops reading (the body is cancelled). */
  event(ev: SseEvent): boolean | undefined;
  /** Each chunk received, comments (keep-alives) included: a sign of life. */
  chunk?(): void;
}

/**
 * Reads `body` to its end: 'ended' when the server closed it, 'stopped' when a handler returned
 * false. Rejects with the body's error (an aborted fetch, a dropped connection) or a handler's
 * (the body is cancelled then).
 */
export async function readSse(
  body: ReadableStream<Uint8Array>,
  h: SseHandlers,
): Promise<'ended' | 'stopped'> {
  // Read from the body itself (not through a TextDecoderStream): cancelling it then closes the
  // connection at once, which a cancel through a pipe does not reliably do.
  const reader = body.getReader();
  const decoder = new TextDecoder();
  let stopped = false;
  const parser = createParser({
    onEvent(m) {
      if (stopped) return;
      if (h.event({ name: m.event ?? 'message', id: m.id ?? null, data: m.data }) === false) stopped = true;
    },
  });
  // The parser holds a CR that ends a chunk until it sees whether LF follows, which would delay
  // an event of a CR-only stream until the next bytes (a keep-alive, 15 s later). A CR ends the
  // line at once: it is fed as CRLF, and a LF opening the next chunk (the rest of a CRLF) dropped.
  let dropLf = false;
  const feed = (text: string) => {
    if (text === '') return;
    const t = dropLf && text.startsWith('\n') ? text.slice(1) : text;
    dropLf = t.endsWith('\r');
    if (t !== '') parser.feed(dropLf ? `${t}\n` : t);
  };
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) {
        feed(decoder.decode());
        return stopped ? 'stopped' : 'ended';
      }
      h.chunk?.();
      feed(decoder.decode(value, { stream: true }));
      if (stopped) {
        await reader.cancel();
        return 'stopped';
      }
    }
  } catch (e) {
    // A handler that throws ends the reading too: the connection must not stay open behind it.
    await reader.cancel(e).catch(() => {});
    throw e;
  } finally {
    reader.releaseLock();
  }
}
