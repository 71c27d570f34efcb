import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { waitFor } from '../../../test/support/poll.js';
import { FakeClock } from '../../lib/clock.js';
import { silentLogger } from '../../lib/log.js';
import type { FeedEvent } from '../../protocol/events.js';
import { Upstream } from './upstream.js';

const ev = (id: string) => ({ id, ts: '2026-01-01T00:00:00.000Z', type: 'progress', payload: {} });

let server: Server | null = null;
let upstream: Upstream | null = null;
afterEach(async () => {
  await upstream?.stop();
  upstream = null;
  const s = server;
  server = null;
  if (!s) return;
  s.closeAllConnections();
  await new Promise((r) => s.close(r));
});

async function serve(handler: (req: IncomingMessage, res: ServerResponse) => void): Promise<string> {
  server = createServer(handler);
  await new Promise<void>((r) => server?.listen(0, '127.0.0.1', r));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}/events/stream`;
}

describe('fan-out upstream', () => {
  it.each([
    ['LF', '\n'],
    ['CR', '\r'],
    ['CRLF', '\r\n'],
  ])('reads a tower stream whose lines end with %s', async (_name, eol) => {
    const url = await serve((req, res) => {
      expect(req.headers.authorization).toBe('Bearer node-jwt');
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      const lines = [
        'retry: 1000',
        '',
        'id: 1',
        `data: ${JSON.stringify(ev('1'))}`,
        '',
        ': keep-alive',
        '',
        'event: reset',
        `data: ${JSON.stringify({ reason: 'retention', last_event_id: '1', resume_after: '4' })}`,
        '',
        'id: 5',
        `data: ${JSON.stringify(ev('5'))}`,
        '',
      ];
      // Byte by byte: every line end is cut from what it ends, a CRLF from itself.
      for (const c of lines.map((l) => l + eol).join('')) res.write(c);
    });
    const got: string[] = [];
    upstream = new Upstream({
      url,
      jwt: 'node-jwt',
      clock: new FakeClock(Date.parse('2026-01-01T00:00:00.000Z')),
      log: silentLogger(),
      ready: async () => {},
      handlers: {
        event: (e: FeedEvent) => got.push(`event ${e.id}`),
        reset: (info) => got.push(`reset ${info.resume_after}`),
        down: (info) => got.push(`down ${info.error}`),
        up: () => got.push('up'),
      },
    });
    upstream.start();
    await waitFor('three messages', () => got.length === 3);
    expect(got).toEqual(['event 1', 'reset 4', 'event 5']);
    expect(upstream.status()).toMatchObject({ state: 'up', last_event_id: '5', events: 2 });
  });
});
