// The attach proxy (docs/attach.md): viewers open GET /api/attach-ws (Bearer, or a single-use
// ticket from POST /api/attach-tickets for browsers, with Origin checked); the tower
// authorizes, sends a signed attach.open on the node's control channel and waits for the node
// to dial back GET /nodes/attach/{stream_id}; then it pipes the two sockets (src/lib/ws-pipe.ts). Every
// refusal reaches the viewer as an error frame with a stable code. Behind a load balancer the
// viewer, the ticket, the node's channel and its dial-back may each reach a different replica:
// a viewer whose node another replica holds is handed to that replica, and a ticket or a
// dial-back is handed to the replica whose id it carries (nodes/forward.ts).
import { createHash, randomBytes } from 'node:crypto';
import type { FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import type { WebSocket } from 'ws';
import type { Logger } from '../../lib/log.js';
import { pipeSockets } from '../../lib/ws-pipe.js';
import {
  ATTACH_TICKETS_PATH,
  ATTACH_WS_PATH,
  type AttachTicket,
  closeCodeOf,
  DIAL_BACK_TIMEOUT_MS,
  decodeServerFrame,
  decodeViewerFrame,
  type ErrorFrame,
  NODE_ATTACH_PREFIX,
  parseSizeQuery,
  TICKET_TTL_MS,
} from '../../protocol/attach.js';
import { attachSignature } from '../../protocol/attach-signature.js';
import { type ErrorCode, isSvcError, SvcError } from '../../protocol/errors.js';
import type { Authenticator } from '../auth/authenticate.js';
import type { CredentialWatch } from '../auth/credential-watch.js';
import { canSeeDomain, hasScope, type Principal } from '../auth/principal.js';
import type { TowerApp } from '../http/app.js';
import {
  type AddressLimitDeps,
  addressRefusal,
  countAuthFailure,
  credentialHeader,
} from '../http/auth-hook.js';
import type { ControlHub } from '../nodes/control-hub.js';
import { forwarded, forwardSocket, ownerOf } from '../nodes/forward.js';
import type { Holder, Presence } from '../nodes/presence.js';
import { type AgentLookup, agentsTableLookup } from '../secrets/agents.js';
import type { Store } from '../store/open.js';
import { attachSchemas } from './schemas.js';

export interface AttachOptions {
  /** Origins besides the tower's own that browsers may attach from (e.g. a console dev server). */
  allowedOrigins?: string[];
  agents?: AgentLookup;
}

interface Ticket {
  /** The Authorization header the ticket was bought with: re-checked while the stream lives. */
  header: string;
  node: string;
  agent: string;
  readOnly: boolean;
  expiresAt: number;
}

interface PendingStream {
  nodeId: string;
  viewer: WebSocket;
  /** The node dialled back, with this credential (re-checked while the stream lives). */
  arrived(node: WebSocket, header: string): void;
}

const MAX_TICKETS = 10_000;

/** What the attach routes use besides their options. */
export interface AttachDeps extends AttachOptions, AddressLimitDeps {
  log: Logger;
  store: Store;
  auth: Authenticator;
  /** Re-checks the credentials of open streams; ends them once revoked. */
  credentials: CredentialWatch;
  /** The node control channels: attach secrets and the dial-back request go through them. */
  nodes: ControlHub;
  /** Aborted when the tower begins shutting down: open streams end on it. */
  shutdown: AbortSignal;
  /** Where nodes' channels and other replicas are (several replicas); none: this one only. */
  presence?: Presence;
}

export const attachRoutes = fp(
  async (app: TowerApp, deps: AttachDeps) => {
    const log = deps.log.child({ component: 'attach' });
    const agents = deps.agents ?? agentsTableLookup;
    const tickets = new Map<string, Ticket>();
    const pending = new Map<string, PendingStream>();
    const watch = deps.credentials;
    const hash = (t: string) => createHash('sha256').update(t).digest('hex');
    const { presence } = deps;
    // Tickets and stream ids name the replica that holds them, so any replica can hand them on.
    const owned = (prefix: string) =>
      `${prefix}_${presence ? `${presence.replicaId}_` : ''}${randomBytes(presence ? 24 : 32).toString('base64url')}`;
    /** The live replica, other than this one, that owns `id` (a ticket or stream id), or null. */
    const ownerElsewhere = async (id: string): Promise<Holder | null> => {
      const owner = ownerOf(id);
      if (!presence || owner === null || owner === presence.replicaId) return null;
      return presence.replica(owner);
    };

    /** May this principal attach to the agent on the node? Throws the refusal. */
    async function authorize(p: Principal, node: string, agent: string, readOnly: boolean): Promise<void> {
      if (p.kind === 'node') throw new SvcError('not_authorized', 'nodes cannot attach to agents');
      const scope = readOnly ? 'feed:read' : 'work:write';
      if (!hasScope(p, scope)) {
        throw new SvcError(
          'not_authorized',
          `attaching${readOnly ? ' read-only' : ''} needs the "${scope}" scope${readOnly ? '' : ' (or attach with read_only)'}`,
        );
      }
      const enrolled = await agents(deps.store.db, agent);
      if (enrolled && enrolled.node_id !== node) {
        throw new SvcError(
          'agent_not_found',
          `agent ${agent} is not on node ${node} (it is on ${enrolled.node_id})`,
        );
      }
      if (enrolled ? !canSeeDomain(p, enrolled.domain_id) : p.domains !== null) {
        throw new SvcError(
          'not_authorized',
          enrolled
            ? `agent ${agent} belongs to domain ${enrolled.domain_id}, which this credential may not see`
            : `agent ${agent} is not enrolled in any domain: only credentials for all domains may attach to it`,
        );
      }
    }

    function originAllowed(req: FastifyRequest): boolean {
      const origin = req.headers.origin;
      if (origin === undefined) return true; // not a browser
      const own = `${req.protocol}://${req.headers.host ?? ''}`;
      return origin === own || (deps.allowedOrigins ?? []).includes(origin);
    }

    app.post(ATTACH_TICKETS_PATH, {
      config: { scope: 'feed:read' },
      schema: attachSchemas.ticket,
      handler: async (req, reply) => {
        const body = req.body;
        const readOnly = body.read_only ?? false;
        await authorize(req.principal, body.node, body.agent, readOnly);
        const now = deps.clock.now();
        for (const [k, t] of tickets) if (t.expiresAt <= now) tickets.delete(k);
        if (tickets.size >= MAX_TICKETS)
          throw new SvcError('rate_limited', 'too many open attach tickets; retry soon', { retryAfter: 60 });
        const ticket = owned('sat');
        const expiresAt = now + TICKET_TTL_MS;
        tickets.set(hash(ticket), {
          header: req.headers.authorization ?? '',
          node: body.node,
          agent: body.agent,
          readOnly,
          expiresAt,
        });
        const res: AttachTicket = {
          ticket,
          node: body.node,
          agent: body.agent,
          read_only: readOnly,
          expires_at: new Date(expiresAt).toISOString(),
        };
        return reply.code(201).send(res);
      },
    });

    app.get(
      ATTACH_WS_PATH,
      { config: { scope: 'public', rateLimitExempt: true }, schema: attachSchemas.viewer, websocket: true },
      (socket, req) => {
        // Frames the viewer sends before the node is there wait in the socket.
        socket.pause();
        // This route authenticates itself (tickets): the address limit applies here as in
        // the auth hook, before any credential is looked up.
        const limited = addressRefusal(deps, req.ip);
        if (limited) return refuse(socket, limited.code, limited.message);
        void openStream(socket, req).catch((e: unknown) => {
          countAuthFailure(deps, req.ip, e);
          const err = isSvcError(e) ? e : new SvcError('internal', 'attach failed');
          if (!isSvcError(e)) log.error({ err: e }, 'attach failed');
          refuse(socket, err.code, err.message);
        });
      },
    );

    async function openStream(viewer: WebSocket, req: FastifyRequest): Promise<void> {
      const q = new URLSearchParams(req.url.slice(req.url.indexOf('?') + 1));
      if (!originAllowed(req)) {
        throw new SvcError(
          'not_authorized',
          `origin ${req.headers.origin} may not attach (tower option allowed origins)`,
        );
      }
      const size = parseSizeQuery(q);
      let node = q.get('node') ?? '';
      let agent = q.get('agent') ?? '';
      let readOnly = size.readOnly;
      let header: string;
      const ticketText = q.get('ticket') ?? q.get('token');
      if (ticketText) {
        const key = hash(ticketText);
        const issuer = tickets.has(key) || forwarded(req) ? null : await ownerElsewhere(ticketText);
        if (issuer) {
          // Issued by another replica: it holds the ticket, and takes the viewer from here.
          forwardSocket(issuer, req, req.url, viewer, { authorization: '', refusal: HOP_REFUSAL });
          return;
        }
        const t = tickets.get(key);
        tickets.delete(key); // single use, even when refused below
        if (!t || t.expiresAt <= deps.clock.now()) {
          throw new SvcError(
            'unauthenticated',
            'unknown, used or expired attach ticket: get a new one (POST /api/attach-tickets)',
          );
        }
        if ((node && node !== t.node) || (agent && agent !== t.agent)) {
          throw new SvcError('not_authorized', 'the ticket is for another agent');
        }
        ({ node, agent, readOnly, header } = t);
      } else {
        header = req.headers.authorization ?? '';
      }
      if (!node || !agent)
        throw new SvcError('bad_request', 'give node and agent: /api/attach-ws?node=N&agent=A');
      // attach.open carries the agent id: what the node would refuse never goes out.
      if (node.length > 200 || agent.length > 200)
        throw new SvcError('bad_request', 'node and agent ids are at most 200 characters');
      const principal = await deps.auth.fromHeader(header || undefined);
      await authorize(principal, node, agent, readOnly);
      const holder =
        deps.nodes.isOnline(node) || !presence || forwarded(req) ? null : await presence.holder(node);
      if (holder && holder.replicaId !== presence?.replicaId) {
        // The node's channel is on another replica: the stream is made there.
        const q = new URLSearchParams({ node, agent, cols: String(size.cols), rows: String(size.rows) });
        if (readOnly) q.set('read_only', '1');
        forwardSocket(holder, req, `${ATTACH_WS_PATH}?${q}`, viewer, {
          authorization: header,
          refusal: HOP_REFUSAL,
        });
        return;
      }
      if (!deps.nodes.isOnline(node)) {
        throw new SvcError(
          'node_offline',
          `node ${node} is not connected to the tower: is its svcd running?`,
        );
      }
      const secret = deps.nodes.attachSecret(node);
      if (!secret) throw new SvcError('node_offline', `node ${node} has not registered an attach secret yet`);

      const streamId = owned('st');
      const fields = {
        stream_id: streamId,
        agent_id: agent,
        cols: size.cols,
        rows: size.rows,
        read_only: readOnly,
        ts: deps.clock.now(),
      };
      let nodeHeader = '';
      const nodeSocket = await new Promise<WebSocket | null>((resolve) => {
        const timer = deps.clock.setTimeout(() => {
          pending.delete(streamId);
          resolve(null);
        }, DIAL_BACK_TIMEOUT_MS);
        pending.set(streamId, {
          nodeId: node,
          viewer,
          arrived: (ws, h) => {
            timer.cancel();
            pending.delete(streamId);
            nodeHeader = h;
            resolve(ws);
          },
        });
        viewer.once('close', () => {
          if (pending.delete(streamId)) {
            timer.cancel();
            resolve(null);
          }
        });
        const sent = deps.nodes.send(node, {
          type: 'attach.open',
          ...fields,
          sig: attachSignature(secret, fields),
          who: principal.name,
        });
        if (!sent) {
          timer.cancel();
          pending.delete(streamId);
          resolve(null);
        }
      });
      if (viewer.readyState !== viewer.OPEN) {
        nodeSocket?.close(1000, 'viewer left');
        return;
      }
      if (!nodeSocket) {
        throw new SvcError(
          'node_offline',
          `node ${node} did not answer the attach request within ${DIAL_BACK_TIMEOUT_MS / 1000} s`,
        );
      }
      const started = deps.clock.now();
      // Both credentials are re-checked while the stream lives: the viewer's, and the node's
      // (a node re-registered, or whose signing key was retired, loses its streams too).
      const unwatchViewer = watch.add(header, {
        end: (why) => {
          refuse(viewer, 'unauthenticated', why);
          nodeSocket.close(1000, 'viewer credential ended');
        },
      });
      const unwatchNode = watch.add(nodeHeader, {
        end: (why) => {
          log.info({ stream: streamId, node, why }, "attach stream closed: the node's credential ended");
          refuse(
            viewer,
            'unavailable',
            "the node's credential is no longer valid; attach again once it reconnects",
          );
          nodeSocket.close(1008, why.slice(0, 120));
        },
      });
      const unwatch = () => {
        unwatchViewer();
        unwatchNode();
      };
      const onShutdown = () => {
        refuse(viewer, 'unavailable', 'the tower is shutting down; attach again');
        nodeSocket.close(1001, 'tower shutting down');
      };
      deps.shutdown.addEventListener('abort', onShutdown, { once: true });
      if (deps.shutdown.aborted) {
        // An aborted signal never fires again.
        unwatch();
        return onShutdown();
      }
      pipeSockets(
        viewer,
        nodeSocket,
        (code) => {
          unwatch();
          deps.shutdown.removeEventListener('abort', onShutdown);
          log.info(
            { stream: streamId, node, agent, who: principal.name, code, ms: deps.clock.now() - started },
            'attach stream closed',
          );
        },
        (code, reason) => {
          log.warn({ stream: streamId, node, agent, code, reason }, 'node side of attach stream failed');
          const f: ErrorFrame = {
            type: 'error',
            code: 'unavailable',
            message: `the node's side of the stream ended abnormally (WebSocket close ${code}${reason ? `: ${reason}` : ''}); attach again`,
          };
          return JSON.stringify(f);
        },
        {
          a: (text) => {
            const d = decodeViewerFrame(text);
            return d.ok === false ? d.why : null;
          },
          b: (text) => {
            const d = decodeServerFrame(text);
            return d.ok === false ? d.why : null;
          },
          onInvalid: (side, why) =>
            log.warn(
              { stream: streamId, node, agent, from: side === 'a' ? 'viewer' : 'node', why },
              'attach stream closed: invalid frame',
            ),
        },
      );
    }

    app.get(
      `${NODE_ATTACH_PREFIX}:stream_id`,
      {
        config: { scope: 'feed:read', rateLimitExempt: true },
        schema: attachSchemas.nodeDialBack,
        websocket: true,
      },
      (socket, req) => {
        const id = req.params.stream_id;
        const p = pending.get(id);
        if (!p && !forwarded(req)) {
          // The node's dial-back reached another replica than the one waiting for it.
          socket.pause();
          void ownerElsewhere(id).then(
            (owner) =>
              owner
                ? forwardSocket(owner, req, req.url, socket, { authorization: credentialHeader(req) })
                : closeResumed(socket, 1008, 'no such attach stream for this node'),
            () => closeResumed(socket, 1011, 'cannot look up the attach stream'),
          );
          return;
        }
        if (!p || req.principal.nodeId !== p.nodeId) {
          socket.close(1008, 'no such attach stream for this node');
          return;
        }
        socket.pause();
        p.arrived(socket, credentialHeader(req));
      },
    );
  },
  { name: 'svc-attach' },
);

/** Closes a paused socket: reading again, so the peer's close frame ends the handshake at once. */
function closeResumed(ws: WebSocket, code: number, reason: string): void {
  ws.resume();
  ws.close(code, reason);
}

/** What a viewer is told when the replica it is handed to cannot be reached. */
const HOP_REFUSAL = {
  code: 'node_offline' as const,
  message: 'the replica holding this node or ticket cannot be reached; attach again',
};

function refuse(ws: WebSocket, code: ErrorCode, message: string): void {
  if (ws.readyState !== ws.OPEN) return;
  const f: ErrorFrame = { type: 'error', code, message };
  ws.resume();
  ws.send(JSON.stringify(f), () => ws.close(closeCodeOf(code), code));
}
