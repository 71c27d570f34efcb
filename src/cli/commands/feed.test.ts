import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Command } from 'commander';
import { afterEach, describe, expect, it } from 'vitest';
import { resolvePaths } from '../../lib/home.js';
import type { FeedEvent } from '../../protocol/events.js';
import { TowerClient } from '../client.js';
import type { CommandDeps } from '../deps.js';
import { registerFeed } from './feed.js';

const ev = (id: string): FeedEvent => ({
  id,
  ts: '2026-01-01T00:00:00.000Z',
  type: 'progress',
  domain_id: 'dom_1',
  mission_id: null,
  agent_id: null,
  status: null,
  payload: { kind: 'note', text: `event ${id}` },
});

let server: Server | null = null;
afterEach(async () => {
  const s = server;
  server = null;
  if (!s) return;
  s.closeAllConnections();
  await new Promise((r) => s.close(r));
});

async function serve(handler: (req: IncomingMessage, res: ServerResponse) => void): Promise<string> {
  server = createServer(handler);
  await new Promise<void>((r) => server?.listen(0, '127.0.0.1', r));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

/** Runs `svc feed …args` in-process against `url`; resolves with what it printed. */
async function feed(url: string, args: string[]): Promise<{ out: string[]; err: string[] }> {
  const out: string[] = [];
  const err: string[] = [];
  const deps: CommandDeps = {
    io: {
      env: {},
      paths: resolvePaths({ SVC_HOME: '/nonexistent' }),
      out: (s) => out.push(s),
      err: (s) => err.push(s),
      readStdin: async () => '',
      stdinIsTTY: () => false,
    },
    client: async () => new TowerClient({ url, token: 'svc_t' }),
  };
  const program = new Command('svc').exitOverride().option('--json');
  registerFeed(program, deps);
  await program.parseAsync(['node', 'svc', 'feed', ...args]);
  return { out, err };
}

describe('svc feed', () => {
  it.each([
    ['LF', '\n'],
    ['CR', '\r'],
    ['CRLF', '\r\n'],
  ])('reads a stream whose lines end with %s', async (_name, eol) => {
    const url = await serve((req, res) => {
      expect(req.headers.authorization).toBe('Bearer svc_t');
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      const lines = [
        'retry: 1000',
        '',
        ': keep-alive',
        '',
        'id: 1',
        `data: ${JSON.stringify(ev('1'))}`,
        '',
        'id: 2',
        'event: reset',
        `data: ${JSON.stringify({ reason: 'retention', last_event_id: '1', resume_after: '4' })}`,
        '',
        'id: 5',
        `data: ${JSON.stringify(ev('5'))}`,
        '',
      ];
      // Written in two parts cut inside a line, and left open: --limit ends the command.
      const text = lines.map((l) => l + eol).join('');
      res.write(text.slice(0, 40));
      res.write(text.slice(40));
    });
    const { out, err } = await feed(url, ['--json', '--limit', '2']);
    expect(out.map((l) => (JSON.parse(l) as FeedEvent).id)).toEqual(['1', '5']);
    expect(err).toEqual(['feed reset (retention): events after 1 are no longer kept; continuing after 4']);
  });
});
