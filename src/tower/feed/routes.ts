// The feed over HTTP: GET /events/stream (SSE), GET /events/ws (WebSocket, one JSON event per
// text frame) and POST /nodes/events (events published by nodes, idempotent by key).
import { setMaxListeners } from 'node:events';
import type { Socket } from 'node:net';
import websocket from '@fastify/websocket';
import type { FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import type { WebSocket } from 'ws';
import { type Clock, iso } from '../../lib/clock.js';
import type { Logger } from '../../lib/log.js';
import { TOWER_MAX_FRAME_BYTES } from '../../protocol/attach.js';
import { SvcError } from '../../protocol/errors.js';
import type { EventType, FeedEvent, StreamQuery } from '../../protocol/events.js';
import type { CredentialWatch } from '../auth/credential-watch.js';
import type { Principal } from '../auth/principal.js';
import type { TowerApp } from '../http/app.js';
import type { RateLimiter } from '../http/rate-limit.js';
import { releaseUpgrade } from '../http/ws-upgrade.js';
import type { Write } from '../store/tx.js';
import { FrameCache, httpChunk } from './frames.js';
import type { FeedFilter, FeedHub, ResetInfo, Subscription } from './hub.js';
import { publishNodeEvents } from './node-events.js';
import { feedSchemas } from './schemas.js';
import { FeedStats } from './stats.js';

/** Bytes a consumer may leave unread before it is cut off (it resumes by id). */
export const STREAM_BUFFER_LIMIT = 1024 * 1024;
/** Replay waits for the consumer above this many unread bytes. */
export const REPLAY_SOFT_LIMIT = 256 * 1024;

export interface FeedRouteOptions {
  hub: FeedHub;
  /** Per-message deflate on /events/ws when a client asks (off by default: memory). */
  wsCompression?: boolean;
  /** Where the streams report their backlogs (the tower registers it on /metrics). */
  stats?: FeedStats;
}

function parseAfter(req: FastifyRequest, q: StreamQuery): bigint | null {
  const header = req.headers['last-event-id'];
  const raw = (Array.isArray(header) ? header[0] : header) ?? q.last_event_id;
  if (raw === undefined || raw === '') return null;
  if (!/^[0-9]{1,19}$/.test(raw)) {
    throw new SvcError('validation_failed', `last event id "${raw.slice(0, 30)}" is not a decimal event id`, {
      errors: [{ field: 'last_event_id', message: 'must be a decimal event id' }],
    });
  }
  return BigInt(raw);
}

function filterOf(q: StreamQuery): FeedFilter {
  const f: FeedFilter = {};
  if (q.domain_id) f.domainIds = q.domain_id;
  if (q.mission_id) f.missionIds = q.mission_id;
  if (q.type) f.types = q.type as EventType[];
  return f;
}

/** The credential the stream was opened with, as an Authorization header value. */
function headerOf(req: FastifyRequest, q: StreamQuery): string {
  const t = q.access_token;
  return req.headers.authorization ?? (t ? `Bearer ${t}` : '');
}

/** The principal's rate_limit block as JSON, or null when limits are off. */
function rateLimitJson(
  deps: Pick<FeedRouteDeps, 'rateLimiter' | 'clock'>,
  principal: Principal,
): string | null {
  const block = deps.rateLimiter.block(principal.id, deps.clock.now());
  return block ? JSON.stringify(block) : null;
}

/** What the feed routes use besides their options. */
export interface FeedRouteDeps extends FeedRouteOptions {
  clock: Clock;
  log: Logger;
  write: Write;
  /** Which store the writes go to (node events are one statement on PostgreSQL). */
  dialect: 'sqlite' | 'postgres';
  /** Streams show the principal's rate-limit block. */
  rateLimiter: RateLimiter;
  /** Re-checks the credentials of open streams; ends them once revoked. */
  credentials: CredentialWatch;
  /** Aborted when the tower begins shutting down: open streams end on it. */
  shutdown: AbortSignal;
}

export const feedRoutes = fp(
  async (app: TowerApp, deps: FeedRouteDeps) => {
    const { hub } = deps;
    const stats = deps.stats ?? new FeedStats();
    // The hub hands every stream the same event objects: their wire bytes are made once.
    const frames = new FrameCache({
      now: () => deps.clock.now(),
      blockOf: (principal) => rateLimitJson(deps, principal),
    });
    // Every open stream listens for shutdown: thousands of listeners are expected, not a leak.
    setMaxListeners(0, deps.shutdown);
    const watch = deps.credentials;
    // This registration serves every WebSocket route of the tower (feed, node control channel,
    // attach): attach senders split terminal bytes to fit (protocol/attach.ts).
    await app.register(websocket, {
      options: { perMessageDeflate: deps.wsCompression ?? false, maxPayload: TOWER_MAX_FRAME_BYTES },
    });

    app.get('/events/stream', {
      config: { scope: 'feed:read', rateLimitExempt: true },
      schema: feedSchemas.stream,
      handler: async (req, reply) => {
        const q = req.query;
        const after = parseAfter(req, q);
        const principal = req.principal;
        reply.hijack();
        const res = reply.raw;
        res.writeHead(200, {
          'content-type': 'text/event-stream; charset=utf-8',
          'cache-control': 'no-cache, no-transform',
          'x-accel-buffering': 'no',
          connection: 'keep-alive',
        });
        res.write('retry: 1000\n\n');
        let sub: Subscription | null = null;
        let closed = false;
        // The hub hands the stream a pass's events at once (replay: one event at a time): the
        // stream collects what it gets in one tick and writes it once (one syscall per pass,
        // not per event), with its rate_limit block taken once per tick. Once the response
        // has sent its head and holds nothing back itself, that write goes straight to the
        // socket as a whole HTTP chunk; a pass's chunk is the very Buffer every stream that
        // got the same events writes (see frames.ts), and the response's per-write chunking
        // work is skipped. res.write() otherwise.
        let pending: (readonly FeedEvent[])[] = [];
        let pendingBytes = 0;
        let block: string | null = null;
        // Whether events were written since the last keep-alive (which is then not needed).
        let active = false;
        const flush = () => {
          const batches = pending;
          pending = [];
          pendingBytes = 0;
          if (closed || batches.length === 0 || res.destroyed) return;
          active = true;
          const socket = res.socket;
          const direct =
            socket !== null &&
            res.headersSent &&
            res.chunkedEncoding &&
            !res.writableCorked &&
            res.writableLength === socket.writableLength;
          if (batches.length === 1) {
            const events = batches[0] as readonly FeedEvent[];
            if (direct) socket.write(frames.sseBytes(events, block, true));
            else res.write(frames.sseBytes(events, block, false));
          } else {
            const body = Buffer.concat(batches.map((events) => frames.sseBytes(events, block, false)));
            if (direct) socket.write(httpChunk(body));
            else res.write(body);
          }
          stats.observe(res.writableLength);
        };
        res.on(
          'close',
          stats.track(() => res.writableLength + pendingBytes),
        );
        const finish = (comment: string | null) => {
          if (closed) return;
          flush();
          closed = true;
          unwatch();
          sub?.close();
          if (comment && !res.writableEnded) res.end(`: ${comment}\n\n`);
          else if (!res.writableEnded) res.end();
        };
        const unwatch = watch.add(headerOf(req, q), {
          // Every stream's keep-alive comes in one turn of the loop: only idle ones write it.
          keepalive: () => {
            if (!active) res.write(': keep-alive\n\n');
            active = false;
          },
          end: (why) => finish(why),
        });
        res.on('close', () => finish(null));
        const onShutdown = () => finish('tower shutting down');
        deps.shutdown.addEventListener('abort', onShutdown, { once: true });
        res.on('close', () => deps.shutdown.removeEventListener('abort', onShutdown));
        if (deps.shutdown.aborted) return onShutdown(); // an aborted signal never fires again
        sub = await hub.subscribe(principal, filterOf(q), after, {
          deliver(events) {
            if (closed) return true;
            if (pending.length === 0) {
              process.nextTick(flush);
              block = frames.block(principal);
            }
            pending.push(events);
            pendingBytes += frames.sseBytes(events, block, false).length;
            // Only what earlier passes left unsent counts: a reading consumer's socket takes
            // each pass at once, so a burst larger than the limit does not cut it off, while
            // one that stopped reading passes the limit within a pass or two (memory stays
            // bounded by the limit plus one pass).
            return res.writableLength <= STREAM_BUFFER_LIMIT;
          },
          busy: () => !closed && res.writableLength + pendingBytes > REPLAY_SOFT_LIMIT,
          drained: () => {
            // Hand what the replay collected to the socket; past the soft limit a write
            // returned false, so 'drain' will come.
            flush();
            if (closed || res.writableLength <= REPLAY_SOFT_LIMIT) return Promise.resolve();
            stats.replayWaited('sse');
            const socket = res.socket;
            return new Promise<void>((resolve) => {
              const done = () => {
                socket?.off('drain', done);
                res.off('drain', done);
                res.off('close', done);
                resolve();
              };
              socket?.on('drain', done);
              res.on('drain', done);
              res.on('close', done);
            });
          },
          reset(info: ResetInfo) {
            if (!closed) res.write(`event: reset\ndata: ${JSON.stringify(info)}\n\n`);
          },
          closed(reason) {
            // An overflowing consumer is cut off hard: its unread buffer is dropped.
            if (reason === 'overflow') {
              closed = true;
              unwatch();
              stats.streamCutOff('sse');
              res.destroy();
            } else finish(reason === 'shutdown' ? 'tower shutting down' : 'feed error; resume by id');
          },
        });
        if (closed) sub.close();
      },
    });

    app.get(
      '/events/ws',
      {
        config: { scope: 'feed:read', rateLimitExempt: true },
        schema: feedSchemas.ws,
        websocket: true,
      },
      async (socket: WebSocket, req) => {
        // A stream may live for hours: it keeps nothing of its upgrade (request, reply).
        releaseUpgrade(socket, req);
        const q = req.query;
        let after: bigint | null;
        try {
          after = parseAfter(req, q);
        } catch (e) {
          socket.close(1008, (e as Error).message.slice(0, 120));
          return;
        }
        const principal = req.principal;
        let sub: Subscription | null = null;
        let closed = false;
        // The hub delivers a page to every stream in one pass: the connection is corked for
        // that pass, so its frames leave in one write instead of one per event. (ws has no
        // public cork; `_socket` is its net.Socket, and ws's own cork/uncork pairs nest.)
        const raw = (socket as unknown as { _socket?: Socket })._socket;
        let corked = false;
        // Whether events were sent since the last keep-alive ping (which is then not needed).
        let active = false;
        let unsentBefore = 0;
        const uncork = () => {
          corked = false;
          raw?.uncork();
          stats.observe(socket.bufferedAmount);
        };
        socket.on(
          'close',
          stats.track(() => socket.bufferedAmount),
        );
        // Replay waits here until the socket has written out enough (send callbacks).
        let waiters: (() => void)[] = [];
        const wakeWaiters = () => {
          const w = waiters;
          waiters = [];
          for (const r of w) r();
        };
        const afterSend = () => {
          if (waiters.length > 0 && (closed || socket.bufferedAmount <= REPLAY_SOFT_LIMIT / 2)) wakeWaiters();
        };
        socket.on('close', wakeWaiters);
        const finish = (code: number, why: string) => {
          if (closed) return;
          closed = true;
          unwatch();
          sub?.close();
          socket.close(code, why);
        };
        const unwatch = watch.add(headerOf(req, q), {
          keepalive: () => {
            if (!active) socket.ping();
            active = false;
          },
          // A close reason is at most 123 bytes.
          end: (why) => finish(1008, why.slice(0, 120)),
        });
        socket.on('close', () => {
          closed = true;
          unwatch();
          sub?.close();
        });
        // The stream is one-way: a client that sends anything is not speaking this protocol,
        // and its stream ends (1008) with a log line.
        socket.on('message', () => {
          if (closed) return;
          deps.log.warn(
            { component: 'feed', principal: principal.id },
            'feed stream closed: the client sent a message',
          );
          finish(1008, 'this stream takes no messages');
        });
        const onShutdown = () => finish(1001, 'tower shutting down');
        deps.shutdown.addEventListener('abort', onShutdown, { once: true });
        socket.on('close', () => deps.shutdown.removeEventListener('abort', onShutdown));
        if (deps.shutdown.aborted) return onShutdown(); // an aborted signal never fires again
        sub = await hub.subscribe(principal, filterOf(q), after, {
          deliver(events) {
            if (closed) return true;
            active = true;
            if (!corked) {
              corked = true;
              unsentBefore = socket.bufferedAmount;
              raw?.cork();
              process.nextTick(uncork);
            }
            const block = frames.block(principal);
            for (const ev of events) socket.send(frames.wsFrame(ev, block), { binary: false }, afterSend);
            // As for SSE: only what earlier passes left unsent counts against the limit.
            return unsentBefore <= STREAM_BUFFER_LIMIT;
          },
          busy: () => {
            stats.observe(socket.bufferedAmount);
            return !closed && socket.bufferedAmount > REPLAY_SOFT_LIMIT;
          },
          drained: () => {
            stats.replayWaited('ws');
            return new Promise<void>((resolve) => {
              waiters.push(resolve);
            });
          },
          reset(info) {
            if (!closed) socket.send(JSON.stringify({ type: 'reset', ...info }));
          },
          closed(reason) {
            if (reason === 'overflow') {
              closed = true;
              unwatch();
              stats.streamCutOff('ws');
              socket.terminate();
            } else finish(reason === 'shutdown' ? 1001 : 1011, reason);
          },
        });
        if (closed) sub.close();
      },
    );

    // Events published by svcd (feed/node-events.ts).
    app.post('/nodes/events', {
      config: { scope: 'feed:read' },
      schema: feedSchemas.nodeEvents,
      handler: async (req, reply) => {
        const nodeId = req.principal.nodeId;
        if (!nodeId) throw new SvcError('forbidden', 'only nodes publish here: use a node credential');
        const body = req.body;
        for (const e of body.events) {
          if (e.domain_id && req.principal.domains !== null && !req.principal.domains.includes(e.domain_id)) {
            throw new SvcError('forbidden', `this node may not publish events of domain ${e.domain_id}`);
          }
        }
        const accepted = await publishNodeEvents(deps.write, deps.dialect, nodeId, body, () =>
          iso(deps.clock.now()),
        );
        return reply.code(202).send({ accepted, duplicates: body.events.length - accepted });
      },
    });
  },
  { name: 'svc-feed' },
);
