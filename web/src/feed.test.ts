/// <reference types="node" />
// The console's feed reader against a real HTTP server speaking SSE: resume with
// Last-Event-ID after a drop, the tower's `reset` event, and the rate-limit block.
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import type { FeedEvent, FeedReset } from '../../src/protocol/events.js';
import { rateLimit } from './api.js';
import { type FeedState, openFeed } from './feed.js';

const ev = (id: string): FeedEvent => ({
  id,
  ts: '2026-01-01T00:00:00.000Z',
  type: 'approval',
  domain_id: 'dm_1',
  mission_id: null,
  agent_id: null,
  status: 'pending',
  payload: { title: `event ${id}` },
  rate_limit: { limit: 100, remaining: 99 - Number(id), reset_at: '2026-01-01T00:01:00.000Z' },
});

let server: Server | null = null;
let close: (() => void) | null = null;
afterEach(async () => {
  close?.();
  close = null;
  const s = server;
  server = null;
  if (!s) return;
  s.closeAllConnections();
  await new Promise((r) => s.close(r));
});

async function serve(
  handler: (req: IncomingMessage, res: ServerResponse, n: number) => void,
): Promise<string> {
  let n = 0;
  server = createServer((req, res) => handler(req, res, n++));
  await new Promise<void>((r) => server?.listen(0, '127.0.0.1', r));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

const sse = (res: ServerResponse) => res.writeHead(200, { 'content-type': 'text/event-stream' });
const send = (res: ServerResponse, e: FeedEvent) => res.write(`id: ${e.id}\ndata: ${JSON.stringify(e)}\n\n`);

describe('openFeed', () => {
  it('resumes after a drop with Last-Event-ID and passes on the reset the tower sends', async () => {
    const seenIds: (string | undefined)[] = [];
    const base = await serve((req, res, n) => {
      seenIds.push(req.headers['last-event-id'] as string | undefined);
      expect(req.headers.authorization).toBe('Bearer svc_t');
      sse(res);
      if (n === 0) {
        send(res, ev('1'));
        send(res, ev('2'));
        res.end(); // the stream drops
      } else {
        const info: FeedReset = { reason: 'retention', last_event_id: '2', resume_after: '7' };
        res.write(`event: reset\ndata: ${JSON.stringify(info)}\n\n`);
        send(res, ev('8'));
      }
    });
    const events: string[] = [];
    const states: FeedState[] = [];
    const resets: FeedReset[] = [];
    close = openFeed(
      'svc_t',
      new URLSearchParams(),
      {
        onEvent: (e) => events.push(e.id),
        onState: (s) => states.push(s),
        onReset: (r) => resets.push(r),
      },
      base,
    );
    await expect.poll(() => events).toEqual(['1', '2', '8']);
    expect(seenIds).toEqual([undefined, '2']);
    expect(resets).toEqual([{ reason: 'retention', last_event_id: '2', resume_after: '7' }]);
    expect(states.slice(0, 4)).toEqual(['connecting', 'live', 'down', 'connecting']);
  });

  it.each([
    ['LF', '\n'],
    ['CR', '\r'],
    ['CRLF', '\r\n'],
  ])('reads a stream whose lines end with %s and resumes from its last id', async (_name, eol) => {
    const seenIds: (string | undefined)[] = [];
    const base = await serve((req, res, n) => {
      seenIds.push(req.headers['last-event-id'] as string | undefined);
      sse(res);
      const write = (lines: string[]) => res.write(lines.map((l) => l + eol).join(''));
      if (n === 0) {
        write([': keep-alive', '']);
        write(['id: 1', `data: ${JSON.stringify(ev('1'))}`, '']);
        // An event cut mid-line between two writes.
        const json = JSON.stringify(ev('2'));
        res.write(`id: 2${eol}data: ${json.slice(0, 10)}`);
        write([json.slice(10), '']);
        res.end();
      } else {
        write([
          'event: reset',
          `data: ${JSON.stringify({ reason: 'retention', last_event_id: '2', resume_after: '3' })}`,
          '',
        ]);
      }
    });
    const events: FeedEvent[] = [];
    const resets: FeedReset[] = [];
    close = openFeed(
      'svc_t',
      new URLSearchParams(),
      { onEvent: (e) => events.push(e), onState: () => {}, onReset: (r) => resets.push(r) },
      base,
    );
    await expect.poll(() => resets.length).toBe(1);
    expect(events).toEqual([ev('1'), ev('2')]);
    expect(seenIds).toEqual([undefined, '2']);
  });

  it('reports the problem detail while the tower refuses the stream', async () => {
    const base = await serve((_req, res) => {
      res.writeHead(401, { 'content-type': 'application/problem+json' });
      res.end(JSON.stringify({ status: 401, code: 'unauthenticated', detail: 'token revoked' }));
    });
    const downs: (string | undefined)[] = [];
    close = openFeed(
      'svc_t',
      new URLSearchParams(),
      { onEvent: () => {}, onState: (s, d) => s === 'down' && downs.push(d) },
      base,
    );
    await expect.poll(() => downs[0]).toBe('token revoked');
  });

  it('keeps the latest rate-limit block seen', () => {
    rateLimit.set({ limit: 10, remaining: 0, reset_at: '2026-01-01T00:00:00.000Z' });
    expect(rateLimit.current).toEqual({ limit: 10, remaining: 0, reset_at: '2026-01-01T00:00:00.000Z' });
  });
});
