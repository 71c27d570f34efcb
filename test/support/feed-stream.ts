// Reading /events/stream in tests: a minimal SSE reader over fetch that records every
// message (id, event name, parsed data) as it arrives.

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
    const decoder = new TextDecoder();
    let buf = '';
    for await (const chunk of res.body) {
      buf += decoder.decode(chunk, { stream: true });
      let i = buf.indexOf('\n\n');
      while (i >= 0) {
        const block = buf.slice(0, i);
        buf = buf.slice(i + 2);
        let id: string | null = null;
        let event = 'message';
        let data = '';
        for (const line of block.split('\n')) {
          if (line.startsWith('id: ')) id = line.slice(4);
          else if (line.startsWith('event: ')) event = line.slice(7);
          else if (line.startsWith('data: ')) data += line.slice(6);
        }
        if (data) got.push({ id, event, data: JSON.parse(data) as Record<string, unknown> });
        i = buf.indexOf('\n\n');
      }
    }
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
