// The tower's end of node control channels (GET /nodes/connect, docs/architecture.md): one WebSocket
// per connected svcd, opened with the node JWT. The node says hello (version, attach secret,
// running agents); the tower answers welcome, then uses the channel for task_ready,
// task_cancelled, attach.open and node.request (answered by node.response). Both sides ping every HEARTBEAT_MS; a channel silent for
// DEAD_AFTER_MS is closed, and the node's agents are marked offline.
//
// Presence is per replica: a node is connected to one replica at a time, so messages for it
// are sent by the replica holding its channel; others do not see it. Work never depends on
// task_ready arriving: workers also poll (docs/worker.md).

import { randomBytes } from 'node:crypto';
import fp from 'fastify-plugin';
import type { WebSocket } from 'ws';
import { type Clock, systemClock, type TimerHandle } from '../../lib/clock.js';
import type { Logger } from '../../lib/log.js';
import {
  CLOSE_POLICY,
  CONTROL_PATH,
  controlDecoder,
  DEAD_AFTER_MS,
  HEARTBEAT_MS,
  NODE_REQUEST_TIMEOUT_MS,
  NODE_TO_TOWER,
  type NodeRequestMethod,
  type NodeResponse,
  type NodeToTower,
  type TowerToNode,
} from '../../protocol/control.js';
import { type ErrorCode, isErrorCode, SvcError } from '../../protocol/errors.js';
import type { CredentialWatch } from '../auth/credential-watch.js';
import type { TowerApp } from '../http/app.js';
import { credentialHeader } from '../http/auth-hook.js';
import { makeAjv } from '../http/validation.js';
import { releaseUpgrade } from '../http/ws-upgrade.js';
import type { Write } from '../store/tx.js';
import { nodeSchemas } from './schemas.js';

interface Channel {
  nodeId: string;
  socket: WebSocket;
  attachSecret: string;
  version: string;
  connectedAt: number;
  lastSeen: number;
}

interface PendingRequest {
  nodeId: string;
  resolve(result: unknown): void;
  reject(e: SvcError): void;
  timer: TimerHandle;
}

export class ControlHub {
  private readonly channels = new Map<string, Channel>();
  private readonly listeners = new Set<(nodeId: string, online: boolean) => void>();
  private readonly pending = new Map<string, PendingRequest>();

  constructor(private readonly clock: Clock = systemClock) {}

  /**
   * Asks the node (over its channel to this replica) to run one of NODE_REQUEST_METHODS and
   * resolves with its result. Refused with node_offline when the node is not connected here
   * or disconnects before answering, unavailable when it does not answer within the timeout,
   * and with the node's own error code (agent_not_found, …) when the method fails there.
   */
  request(
    nodeId: string,
    method: NodeRequestMethod,
    params: Record<string, unknown>,
    timeoutMs = NODE_REQUEST_TIMEOUT_MS,
  ): Promise<unknown> {
    const requestId = `rq_${randomBytes(12).toString('base64url')}`;
    return new Promise((resolve, reject) => {
      const timer = this.clock.setTimeout(() => {
        this.pending.delete(requestId);
        reject(
          new SvcError('unavailable', `node ${nodeId} did not answer ${method} within ${timeoutMs / 1000} s`),
        );
      }, timeoutMs);
      this.pending.set(requestId, { nodeId, resolve, reject, timer });
      if (!this.send(nodeId, { type: 'node.request', request_id: requestId, method, params })) {
        timer.cancel();
        this.pending.delete(requestId);
        reject(
          new SvcError('node_offline', `node ${nodeId} is not connected to the tower: is its svcd running?`),
        );
      }
    });
  }

  /** @internal a node.response arrived on the node's channel. */
  answer(nodeId: string, msg: NodeResponse): void {
    const p = this.pending.get(msg.request_id);
    // Only the node that was asked may answer.
    if (!p || p.nodeId !== nodeId) return;
    this.pending.delete(msg.request_id);
    p.timer.cancel();
    if (msg.error) {
      const code: ErrorCode = isErrorCode(msg.error.code) ? msg.error.code : 'internal';
      p.reject(new SvcError(code, msg.error.message));
    } else p.resolve(msg.result ?? null);
  }

  /** True while the node has a live channel to this replica. */
  isOnline(nodeId: string): boolean {
    return this.channels.has(nodeId);
  }

  /** The attach secret the node registered on its current channel, or null. */
  attachSecret(nodeId: string): string | null {
    return this.channels.get(nodeId)?.attachSecret ?? null;
  }

  connectedNodes(): string[] {
    return [...this.channels.keys()];
  }

  /** Sends a message on the node's channel; false when the node is not connected here. */
  send(nodeId: string, msg: TowerToNode): boolean {
    const c = this.channels.get(nodeId);
    if (!c || c.socket.readyState !== c.socket.OPEN) return false;
    c.socket.send(JSON.stringify(msg));
    return true;
  }

  onPresence(fn: (nodeId: string, online: boolean) => void): () => void {
    this.listeners.add(fn);
    return () => this.listeners.delete(fn);
  }

  /** @internal */
  register(c: Channel): Channel | undefined {
    const previous = this.channels.get(c.nodeId);
    this.channels.set(c.nodeId, c);
    if (!previous) for (const l of this.listeners) l(c.nodeId, true);
    return previous;
  }

  /** @internal */
  unregister(c: Channel): boolean {
    if (this.channels.get(c.nodeId) !== c) return false;
    this.channels.delete(c.nodeId);
    for (const [id, p] of this.pending) {
      if (p.nodeId !== c.nodeId) continue;
      this.pending.delete(id);
      p.timer.cancel();
      p.reject(new SvcError('node_offline', `node ${c.nodeId} disconnected before answering`));
    }
    for (const l of this.listeners) l(c.nodeId, false);
    return true;
  }

  closeAll(): void {
    for (const c of this.channels.values()) c.socket.close(1001, 'tower shutting down');
  }
}

/** What the control channel route uses. */
export interface ControlRoutesDeps {
  hub: ControlHub;
  clock: Clock;
  log: Logger;
  write: Write;
  /** Re-checks the credentials of open channels; ends them once revoked. */
  credentials: CredentialWatch;
  /**
   * Control channels (open sockets, greeted or not) this replica holds at most; past it a
   * connect is answered 503 with Retry-After, so a reconnect storm is shed (the node retries
   * later, or through the balancer on another replica) rather than taken. 0 or none: no limit.
   */
  maxChannels?: number;
}

/** Retry-After of a connect refused because this replica holds its limit of channels. */
export const CHANNELS_FULL_RETRY_AFTER_S = 5;

export const controlRoutes = fp(
  async (app: TowerApp, deps: ControlRoutesDeps) => {
    const { hub } = deps;
    const maxChannels = deps.maxChannels ?? 0;
    const ajv = makeAjv(false);
    const decode = controlDecoder<NodeToTower>(NODE_TO_TOWER, (schema) => {
      const validate = ajv.compile(schema);
      return (v) => (validate(v) ? null : ajv.errorsText(validate.errors, { dataVar: 'message' }));
    });
    const log = deps.log.child({ component: 'control' });

    const setAgents = async (
      nodeId: string,
      statuses: { agent_id: string; status: string }[] | 'offline',
    ) => {
      try {
        await deps.write(async (tx) => {
          if (statuses === 'offline') {
            await tx.db
              .updateTable('agents')
              .set({ status: 'offline', updated_at: tx.now })
              .where('node_id', '=', nodeId)
              .execute();
            return;
          }
          await tx.db
            .updateTable('agents')
            .set({ status: 'idle', updated_at: tx.now })
            .where('node_id', '=', nodeId)
            .where('status', '=', 'offline')
            .execute();
          for (const s of statuses) {
            await tx.db
              .updateTable('agents')
              .set({ status: s.status, updated_at: tx.now })
              .where('node_id', '=', nodeId)
              .where('id', '=', s.agent_id)
              .execute();
          }
        });
      } catch (e) {
        log.warn({ err: e, node: nodeId }, 'cannot record agent presence');
      }
    };

    let sockets = 0;
    // Before the upgrade: a refused connect costs no WebSocket and no presence write.
    const shed = async () => {
      if (maxChannels > 0 && sockets >= maxChannels) {
        throw new SvcError(
          'unavailable',
          `this replica holds its limit of ${maxChannels} node channels; retry in ${CHANNELS_FULL_RETRY_AFTER_S} s`,
          { retryAfter: CHANNELS_FULL_RETRY_AFTER_S },
        );
      }
    };
    const route = {
      config: { scope: 'feed:read' as const },
      schema: nodeSchemas.connect,
      websocket: true as const,
      preValidation: shed,
    };
    app.get(CONTROL_PATH, route, (socket: WebSocket, req) => {
      // A channel lives for hours: it keeps nothing of its upgrade (request, headers, reply).
      releaseUpgrade(socket, req);
      sockets++;
      socket.once('close', () => {
        sockets--;
      });
      const nodeId = req.principal.nodeId;
      if (!nodeId) {
        socket.close(1008, 'node credential required');
        return;
      }
      let channel: Channel | null = null;
      let timer: TimerHandle | null = null;
      // The channel lives only as long as its credential: a node re-registered (JWT rotated),
      // a signing key retired, on any replica, closes it at the next re-check.
      const unwatch = deps.credentials.add(credentialHeader(req), {
        end: (why) => {
          log.info({ node: nodeId, why }, "control channel closed: the node's credential ended");
          socket.close(CLOSE_POLICY, why.slice(0, 120));
        },
      });
      let lastSeen = deps.clock.now();
      const seen = () => {
        lastSeen = deps.clock.now();
        if (channel) channel.lastSeen = lastSeen;
      };
      const beat = () => {
        timer = deps.clock.setTimeout(() => {
          if (deps.clock.now() - lastSeen >= DEAD_AFTER_MS) {
            log.info({ node: nodeId }, 'control channel silent; closing it');
            socket.terminate();
            return;
          }
          if (socket.readyState === socket.OPEN) socket.ping();
          beat();
        }, HEARTBEAT_MS);
      };
      beat();
      socket.on('pong', seen);
      socket.on('ping', seen);
      socket.on('message', (data, isBinary) => {
        seen();
        if (socket.readyState !== socket.OPEN) return;
        // Decode before touching: a frame that is not a valid message of a known type closes
        // this channel (1008), never the process.
        const bad = (why: string) => {
          log.warn({ node: nodeId, why }, 'control channel closed: invalid message');
          socket.close(CLOSE_POLICY, why.slice(0, 120));
        };
        if (isBinary) return bad('binary frames are not part of the control protocol');
        const d = decode(String(data));
        if (d.ok === false) return bad(d.why);
        if (!channel) {
          if (d.ok !== true || d.msg.type !== 'hello') return bad('the first message must be a valid hello');
          const h = d.msg;
          channel = {
            nodeId,
            socket,
            attachSecret: h.attach_secret,
            version: h.version,
            connectedAt: deps.clock.now(),
            lastSeen,
          };
          const previous = hub.register(channel);
          // A node reconnecting replaces its old channel (the old one may not know it is dead).
          previous?.socket.close(4000, 'replaced by a newer channel');
          socket.send(JSON.stringify({ type: 'welcome', node_id: nodeId, heartbeat_ms: HEARTBEAT_MS }));
          log.info({ node: nodeId, version: h.version }, 'node connected');
          void setAgents(nodeId, h.agents ?? []);
          return;
        }
        // Unknown types are skipped: newer nodes may send more than this tower knows.
        if (d.ok !== true) return;
        const m = d.msg;
        if (m.type === 'agent_status') void setAgents(nodeId, [{ agent_id: m.agent_id, status: m.status }]);
        else if (m.type === 'node.response') hub.answer(nodeId, m);
        else if (m.type === 'hello') bad('hello was already sent on this channel');
      });
      socket.on('close', () => {
        unwatch();
        timer?.cancel();
        if (channel && hub.unregister(channel)) {
          log.info({ node: nodeId }, 'node disconnected');
          void setAgents(nodeId, 'offline');
        }
      });
    });
  },
  { name: 'svc-control' },
);
