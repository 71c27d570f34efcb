// The local side of the fan-out: GET /events (SSE) and GET /events/ws (one JSON event per text
// frame) on a unix socket (0600) or a loopback TCP port (bearer token). Replays from the ring
// on Last-Event-ID, then relays live entries. Owns sockets and keep-alives, decides nothing
// about what an event is: fanout.ts hands it finished entries.
import { timingSafeEqual } from 'node:crypto';
import { chmod, unlink } from 'node:fs/promises';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { WebSocket, WebSocketServer } from 'ws';
import type { Clock, TimerHandle } from '../../lib/clock.js';
import type { Logger } from '../../lib/log.js';
import { problemOf, SvcError } from '../../protocol/errors.js';
import {
  CONSUMER_BUFFER_LIMIT,
  type Consumer,
  type Entry,
  type Filter,
  type LocalEvent,
} from './consumer.js';
import { type EventRing, parseEventKey } from './ring.js';

export type { Consumer, Entry, Filter, LocalEvent };

const KEEPALIVE_MS = 15_000;

export interface ListenerOptions {
  ring: EventRing<LocalEvent>;
  listen: { kind: 'unix'; path: string } | { kind: 'tcp'; host: string; port: number };
  /** Required bearer token on TCP (null = none). */
  token: string | null;
  clock: Clock;
  log: Logger;
  /** svcd's metrics as Prometheus text, for GET /metrics (same access as /events). */
  metrics?: () => Promise<string>;
}

function passes(f: Filter, e: Entry): boolean {
  // Connection state is for everyone: a filtered UI still needs its banner.
  const ev = e.value.meta;
  if (ev === null) return true;
  if (f.types.length > 0 && !f.types.includes(ev.type)) return false;
  if (f.domains.length > 0 && (ev.domain_id === null || !f.domains.includes(ev.domain_id))) return false;
  if (f.missions.length > 0 && (ev.mission_id === null || !f.missions.includes(ev.mission_id))) return false;
  return true;
}

export class FanoutListener {
  private server: Server | null = null;
  private readonly wss = new WebSocketServer({ noServer: true, perMessageDeflate: false, maxPayload: 4096 });
  private readonly consumers = new Set<Consumer>();
  private keepaliveTimer: TimerHandle | null = null;
  private address = '';
  private served = 0;

  constructor(private readonly opts: ListenerOptions) {}

  /** Starts listening; returns the address (socket path or http://host:port). */
  async listen(): Promise<string> {
    const server = createServer((req, res) => this.onRequest(req, res));
    server.on('upgrade', (req, socket, head) => this.onUpgrade(req, socket as Socket, head));
    this.server = server;
    const l = this.opts.listen;
    if (l.kind === 'unix') {
      await unlink(l.path).catch(() => {});
      await new Promise<void>((resolve, reject) => {
        server.once('error', reject);
        server.listen(l.path, () => resolve());
      });
      await chmod(l.path, 0o600);
      this.address = l.path;
    } else {
      await new Promise<void>((resolve, reject) => {
        server.once('error', reject);
        server.listen(l.port, l.host, () => resolve());
      });
      const a = server.address() as AddressInfo;
      this.address = `http://${a.family === 'IPv6' ? `[${a.address}]` : a.address}:${a.port}`;
    }
    this.armKeepalive();
    return this.address;
  }

  async close(): Promise<void> {
    this.keepaliveTimer?.cancel();
    this.keepaliveTimer = null;
    for (const c of this.consumers) c.close();
    this.consumers.clear();
    const server = this.server;
    this.server = null;
    if (!server) return;
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
    this.wss.close();
    if (this.opts.listen.kind === 'unix') await unlink(this.opts.listen.path).catch(() => {});
  }

  /** Relays an entry (already in the ring) to every live consumer whose filter takes it. */
  broadcast(e: Entry): void {
    for (const c of this.consumers) if (passes(c.filter, e)) c.send(e);
  }

  status() {
    return { address: this.address, consumers: this.consumers.size, consumers_served: this.served };
  }

  /**
   * Adds a consumer from elsewhere (mgmt.sock's events.subscribe): replays after `after` (a
   * valid event id, or null for live events only), then relays live entries. Returns what
   * removes it.
   */
  subscribe(consumer: Consumer, after: string | null, sendReset: (r: object) => void): () => void {
    this.attach(consumer, after, sendReset);
    return () => {
      this.consumers.delete(consumer);
    };
  }

  private armKeepalive(): void {
    this.keepaliveTimer = this.opts.clock.setTimeout(() => {
      for (const c of this.consumers) c.keepalive();
      this.armKeepalive();
    }, KEEPALIVE_MS);
  }

  /** Access and query checks shared by /events and /events/ws: the parsed request, or why not. */
  private admit(
    req: IncomingMessage,
    url: URL,
  ): { parsed: ReturnType<FanoutListener['parse']> } | { error: SvcError } {
    const refused = this.refuse(req, url);
    if (refused) return { error: refused };
    try {
      return { parsed: this.parse(req, url) };
    } catch (e) {
      return { error: e as SvcError };
    }
  }

  /** Checks who asks; returns the problem to answer with, or null when the request may go on. */
  private refuse(req: IncomingMessage, url: URL): SvcError | null {
    if (this.opts.listen.kind !== 'tcp') return null;
    // A web page elsewhere must not read the feed through DNS rebinding: only loopback names.
    const host = (req.headers.host ?? '').replace(/:\d+$/, '').replace(/^\[(.*)\]$/, '$1');
    if (host && !['localhost', '::1'].includes(host) && !/^127\.\d+\.\d+\.\d+$/.test(host)) {
      return new SvcError('forbidden', `Host "${host}" is not a loopback name`);
    }
    if (this.opts.token === null) return null;
    const auth = req.headers.authorization;
    const given = auth?.startsWith('Bearer ') ? auth.slice(7) : (url.searchParams.get('access_token') ?? '');
    const a = Buffer.from(given);
    const b = Buffer.from(this.opts.token);
    if (a.length === b.length && timingSafeEqual(a, b)) return null;
    return new SvcError(
      'unauthenticated',
      'send "Authorization: Bearer <token>" with the token in $SVC_HOME/svcd/fanout.token (or ?access_token=)',
    );
  }

  /** Filters and resume point of a request, or the validation error naming the field. */
  private parse(req: IncomingMessage, url: URL): { filter: Filter; after: string | null } {
    const header = req.headers['last-event-id'];
    const raw = (Array.isArray(header) ? header[0] : header) ?? url.searchParams.get('last_event_id');
    const after = raw === undefined || raw === null || raw === '' ? null : raw;
    if (after !== null && parseEventKey(after) === null) {
      throw new SvcError(
        'validation_failed',
        `last event id "${after.slice(0, 30)}" is not an event id of this stream`,
        {
          errors: [{ field: 'last_event_id', message: 'must be an id such as "1234" or "1234.2"' }],
        },
      );
    }
    for (const k of url.searchParams.keys()) {
      if (!['type', 'domain_id', 'mission_id', 'last_event_id', 'access_token'].includes(k)) {
        throw new SvcError('validation_failed', `unknown query parameter "${k}"`, {
          errors: [{ field: k, message: 'allowed: type, domain_id, mission_id, last_event_id' }],
        });
      }
    }
    return {
      filter: {
        types: url.searchParams.getAll('type'),
        domains: url.searchParams.getAll('domain_id'),
        missions: url.searchParams.getAll('mission_id'),
      },
      after,
    };
  }

  private onRequest(req: IncomingMessage, res: ServerResponse): void {
    const url = new URL(req.url ?? '/', 'http://local');
    const fail = (e: SvcError) => {
      res.writeHead(e.status, { 'content-type': 'application/problem+json' });
      res.end(JSON.stringify(problemOf(e)));
    };
    if (url.pathname === '/metrics' && this.opts.metrics) {
      this.serveMetrics(req, res, this.opts.metrics, fail);
      return;
    }
    if (url.pathname !== '/events') {
      fail(new SvcError('not_found', `no route ${url.pathname}: use GET /events (SSE) or GET /events/ws`));
      return;
    }
    if (req.method !== 'GET') {
      fail(new SvcError('method_not_allowed', 'use GET'));
      return;
    }
    const admitted = this.admit(req, url);
    if ('error' in admitted) {
      fail(admitted.error);
      return;
    }
    const { parsed } = admitted;
    res.writeHead(200, {
      'content-type': 'text/event-stream; charset=utf-8',
      'cache-control': 'no-cache, no-transform',
      'x-accel-buffering': 'no',
      connection: 'keep-alive',
    });
    res.write('retry: 1000\n\n');
    let closed = false;
    let allowance = CONSUMER_BUFFER_LIMIT;
    const consumer: Consumer = {
      filter: parsed.filter,
      send: (e) => {
        if (closed) return;
        if (res.writableLength > allowance) {
          consumer.close();
          return;
        }
        res.write(e.value.sse);
      },
      replay: (entries) => {
        if (entries.length === 0) return;
        res.write(entries.map((e) => e.value.sse).join(''));
        allowance = res.writableLength + CONSUMER_BUFFER_LIMIT;
      },
      keepalive: () => {
        if (!closed) res.write(': keep-alive\n\n');
      },
      close: () => {
        if (closed) return;
        closed = true;
        this.consumers.delete(consumer);
        res.destroy();
      },
    };
    res.on('close', () => {
      closed = true;
      this.consumers.delete(consumer);
    });
    this.attach(consumer, parsed.after, (reset) =>
      res.write(`event: reset\ndata: ${JSON.stringify(reset)}\n\n`),
    );
  }

  private serveMetrics(
    req: IncomingMessage,
    res: ServerResponse,
    metrics: () => Promise<string>,
    fail: (e: SvcError) => void,
  ): void {
    const refused =
      req.method !== 'GET'
        ? new SvcError('method_not_allowed', 'use GET')
        : this.refuse(req, new URL(req.url ?? '/', 'http://local'));
    if (refused) {
      fail(refused);
      return;
    }
    metrics().then(
      (text) => {
        res.writeHead(200, { 'content-type': 'text/plain; version=0.0.4; charset=utf-8' });
        res.end(text);
      },
      (e: unknown) => fail(new SvcError('internal', `metrics: ${(e as Error).message}`)),
    );
  }

  private onUpgrade(req: IncomingMessage, socket: Socket, head: Buffer): void {
    const url = new URL(req.url ?? '/', 'http://local');
    const reject = (e: SvcError) => {
      const body = JSON.stringify(problemOf(e));
      socket.end(
        `HTTP/1.1 ${e.status} ${e.code}\r\ncontent-type: application/problem+json\r\ncontent-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`,
      );
    };
    if (url.pathname !== '/events/ws') {
      reject(new SvcError('not_found', `no WebSocket route ${url.pathname}: use /events/ws`));
      return;
    }
    const admitted = this.admit(req, url);
    if ('error' in admitted) {
      reject(admitted.error);
      return;
    }
    const { parsed } = admitted;
    this.wss.handleUpgrade(req, socket, head, (ws) => {
      let closed = false;
      let allowance = CONSUMER_BUFFER_LIMIT;
      const consumer: Consumer = {
        filter: parsed.filter,
        send: (e) => {
          if (closed) return;
          if (ws.bufferedAmount > allowance) {
            closed = true;
            this.consumers.delete(consumer);
            ws.terminate();
            return;
          }
          ws.send(e.value.json);
        },
        replay: (entries) => {
          for (const e of entries) ws.send(e.value.json);
          if (entries.length > 0) allowance = ws.bufferedAmount + CONSUMER_BUFFER_LIMIT;
        },
        keepalive: () => {
          if (!closed) ws.ping();
        },
        close: () => {
          if (closed) return;
          closed = true;
          this.consumers.delete(consumer);
          ws.close(1001, 'svcd shutting down');
        },
      };
      ws.on('close', () => {
        closed = true;
        this.consumers.delete(consumer);
      });
      // The stream is one-way: a consumer that sends anything is not speaking this protocol,
      // and its connection ends (1008) with a log line.
      ws.on('message', () => {
        if (closed) return;
        closed = true;
        this.consumers.delete(consumer);
        this.opts.log.warn('fan-out consumer closed: it sent a message on a one-way stream');
        ws.close(1008, 'this stream takes no messages');
      });
      ws.on('error', () => {});
      this.attach(consumer, parsed.after, (reset) => {
        if (ws.readyState === WebSocket.OPEN) ws.send(JSON.stringify({ type: 'reset', ...reset }));
      });
    });
  }

  /**
   * Replays what the consumer missed, then registers it for live entries. Both happen in the
   * same synchronous turn, so nothing can slip between replay and live.
   */
  private attach(consumer: Consumer, after: string | null, sendReset: (r: object) => void): void {
    const key = after === null ? null : parseEventKey(after);
    const plan = this.opts.ring.resume(key, after);
    if (plan.reset) sendReset(plan.reset);
    consumer.replay(plan.entries.filter((e) => passes(consumer.filter, e)));
    this.consumers.add(consumer);
    this.served++;
  }
}
