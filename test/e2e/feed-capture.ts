// Records everything the tower's feed sends from its first event on (resume from id 0), so leak
// tests can search it. Towers without the feed yet answer 404 and the capture stays empty.
import { existsSync } from 'node:fs';
import { resolve } from 'node:path';

/** True once the feed area is in the tree. TODO(secrets): drop when the feed is on main. */
export const HAS_FEED = existsSync(resolve(import.meta.dirname, '../../src/tower/feed/hub.ts'));

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
