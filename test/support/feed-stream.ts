// Reading /events/stream in tests: the product's SSE reader over fetch, recording every
// message (id, event name, parsed data) as it arrives.
import { readSse } from '../../src/lib/sse-reader.js';

export interface Received {
  id: string | null;
  event: string;
  data: Record<string, unknown>;
}

export interface OpenStream {
  got: Received[];
  ended(): boolean;
  status(): number;
  close(): Promise<void>;
}

export function openStream(url: string, token: string, headers: Record<string, string> = {}): OpenStream {
  const abort = new AbortController();
  const got: Received[] = [];
  let ended = false;
  let status = 0;
  const done = (async () => {
    const res = await fetch(url, {
      headers: { authorization: `Bearer ${token}`, accept: 'text/event-stream', ...headers },
      signal: abort.signal,
    });
    status = res.status;
    if (!res.body) return;
    await readSse(res.body, {
      event: ({ name, id, data }) => {
        if (data) got.push({ id, event: name, data: JSON.parse(data) as Record<string, unknown> });
        return true;
      },
    });
  })()
    .catch(() => {})
    .finally(() => {
      ended = true;
    });
  return {
    got,
    ended: () => ended,
    status: () => status,
    async close() {
      abort.abort();
      await done;
    },
  };
}
