// Records everything the tower's feed sends from its first event on (resume from id 0), so leak
// tests can search it.

export interface FeedCapture {
  text(): string;
  stop(): Promise<void>;
}

export function captureFeed(baseUrl: string, token: string): FeedCapture {
  const abort = new AbortController();
  let text = '';
  const done = (async () => {
    const res = await fetch(`${baseUrl}/events/stream?last_event_id=0`, {
      headers: { authorization: `Bearer ${token}`, accept: 'text/event-stream' },
      signal: abort.signal,
    });
    if (!res.ok || !res.body) return;
    const decoder = new TextDecoder();
    for await (const chunk of res.body) text += decoder.decode(chunk, { stream: true });
  })().catch(() => {});
  return {
    text: () => text,
    async stop() {
      abort.abort();
      await done;
    },
  };
}
