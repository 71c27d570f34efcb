// svcd's end of the node control channel (GET /nodes/connect, src/protocol/control.ts): one
// WebSocket to the tower with the node JWT, kept open for the daemon's life. Each connection
// starts with hello (a fresh attach secret per svcd start, the running agents); the tower's
// messages (task_ready, task_cancelled, attach.open) go to whoever subscribed with on().
// Reconnects with backoff (1 s doubling to 30 s, jittered; a tower shedding load with 503 and
// Retry-After is left alone that long, jittered up to half again, so a fleet refused at once
// does not come back at once); both sides ping, and a channel silent for DEAD_AFTER_MS is
// dropped and reopened. The WebSocket is `ws`: Node's built-in
// WebSocket (undici) can send the Authorization header on Node 22 and 24, but it neither
// exposes pings and pongs (the liveness check above) nor the status of a refused upgrade (401).

import { randomBytes } from 'node:crypto';
import WebSocket from 'ws';
import { Backoff } from '../../lib/backoff.js';
import type { Clock, TimerHandle } from '../../lib/clock.js';
import type { Logger } from '../../lib/log.js';
import { compileCheck } from '../../protocol/check.js';
import {
  type AgentStatusMsg,
  CLOSE_POLICY,
  CONTROL_PATH,
  controlDecoder,
  DEAD_AFTER_MS,
  HEARTBEAT_MS,
  type NodeToTower,
  TOWER_TO_NODE,
  type TowerToNode,
} from '../../protocol/control.js';
import type { Component } from '../component.js';

type MessageOf<T extends TowerToNode['type']> = Extract<TowerToNode, { type: T }>;

export interface ControlChannel extends Component {
  readonly connected: boolean;
  /** This svcd's attach secret (fresh per start; the tower signs attach.open with it). */
  readonly attachSecret: string;
  on<T extends TowerToNode['type']>(type: T, fn: (msg: MessageOf<T>) => void): () => void;
  /** Sends when connected; false otherwise (presence is re-sent in the next hello). */
  send(msg: NodeToTower): boolean;
  /** Resolves once connected (or when the daemon stops). */
  waitConnected(): Promise<void>;
  /**
   * Reports an agent's presence to the tower (agent_status now if connected; in the hello of
   * every reconnection). Null: the agent stopped here (reported offline, then forgotten).
   */
  setAgentStatus(agentId: string, status: AgentPresence | null): void;
}

export type AgentPresence = AgentStatusMsg['status'];

export interface ControlDeps {
  backendUrl: string;
  jwt: string;
  version: string;
  clock: Clock;
  log: Logger;
  /** Agents running now, for the hello of each (re)connection (default: setAgentStatus's). */
  agents?: () => { agent_id: string; status: string }[];
  random?: () => number;
}

/**
 * The wait before the next connect: the backoff's, or when the tower answered 503 with
 * Retry-After, at least that, spread over 1 to 1.5 times it.
 */
export function reconnectDelay(backoffMs: number, retryAfterS: number | null, random: () => number): number {
  if (retryAfterS === null || !(retryAfterS > 0)) return backoffMs;
  return Math.max(backoffMs, Math.round(retryAfterS * 1000 * (1 + random() / 2)));
}

/** Retry-After in seconds (RFC 9110: delay-seconds; an HTTP date is not sent by the tower). */
function retryAfterOf(header: string | string[] | undefined): number | null {
  const v = Array.isArray(header) ? header[0] : header;
  return v !== undefined && /^\d+$/.test(v.trim()) ? Number(v) : null;
}

export function createControlChannel(deps: ControlDeps): ControlChannel {
  const log = deps.log.child({ component: 'control' });
  const attachSecret = randomBytes(32).toString('hex');
  const listeners = new Map<string, Set<(msg: never) => void>>();
  const random = deps.random ?? Math.random;
  const backoff = new Backoff({ random });
  const url = `${deps.backendUrl.replace(/^http/, 'ws').replace(/\/$/, '')}${CONTROL_PATH}`;
  let socket: WebSocket | null = null;
  let welcomed = false;
  let stopped = true;
  let retry: TimerHandle | null = null;
  let beat: TimerHandle | null = null;
  let lastSeen = 0;
  let connects = 0;
  let lastError: string | null = null;
  let connectedSince: number | null = null;
  let waiters: (() => void)[] = [];
  const presence = new Map<string, AgentPresence>();
  // Decode before touching, without Ajv (an idle svcd keeps it unloaded): protocol/check.ts.
  const decode = controlDecoder<TowerToNode>(TOWER_TO_NODE, (schema) => {
    const check = compileCheck(schema);
    return (v) => {
      const f = check(v);
      return f === null ? null : `${f.path || 'message'} ${f.message}`;
    };
  });
  const agentsNow = deps.agents ?? (() => [...presence].map(([agent_id, status]) => ({ agent_id, status })));

  function emit(msg: TowerToNode) {
    for (const fn of listeners.get(msg.type) ?? []) {
      try {
        (fn as (m: TowerToNode) => void)(msg);
      } catch (e) {
        log.error({ err: e, type: msg.type }, 'control message handler failed');
      }
    }
  }

  function scheduleReconnect(retryAfterS: number | null) {
    if (stopped || retry) return;
    const wait = reconnectDelay(backoff.next(), retryAfterS, random);
    log.info({ in_ms: wait, error: lastError }, 'control channel down; reconnecting');
    retry = deps.clock.setTimeout(() => {
      retry = null;
      open();
    }, wait);
  }

  function heartbeat() {
    beat = deps.clock.setTimeout(() => {
      if (!socket) return;
      if (deps.clock.now() - lastSeen >= DEAD_AFTER_MS) {
        lastError = 'tower silent';
        socket.terminate();
        return;
      }
      if (socket.readyState === WebSocket.OPEN) socket.ping();
      heartbeat();
    }, HEARTBEAT_MS);
  }

  function open() {
    if (stopped) return;
    const ws = new WebSocket(url, {
      headers: { authorization: `Bearer ${deps.jwt}` },
      handshakeTimeout: 10_000,
    });
    socket = ws;
    welcomed = false;
    let refused = false;
    let retryAfterS: number | null = null;
    const seen = () => {
      lastSeen = deps.clock.now();
    };
    ws.on('open', () => {
      seen();
      heartbeat();
      ws.send(
        JSON.stringify({
          type: 'hello',
          version: deps.version,
          attach_secret: attachSecret,
          agents: agentsNow(),
        }),
      );
    });
    ws.on('ping', seen);
    ws.on('pong', seen);
    ws.on('unexpected-response', (_req, res) => {
      const { statusCode } = res;
      refused = true;
      if (statusCode === 503) retryAfterS = retryAfterOf(res.headers['retry-after']);
      lastError =
        statusCode === 401
          ? 'the tower refused the node credential (401): re-register with "svc agent node register --force"'
          : statusCode === 503 && retryAfterS !== null
            ? `the tower is shedding load (503): retrying after ${retryAfterS} s or more`
            : `HTTP ${statusCode}`;
      ws.terminate();
    });
    ws.on('message', (data, isBinary) => {
      seen();
      if (socket !== ws) return;
      const d = isBinary
        ? ({ ok: false, why: 'binary frames are not part of the control protocol' } as const)
        : decode(String(data));
      if (d.ok === false) {
        // A tower that sends what svcd cannot read: drop this channel and dial again.
        lastError = `the tower sent an invalid control message (${d.why})`;
        log.warn({ why: d.why }, 'control channel closed: invalid message');
        ws.close(CLOSE_POLICY, d.why.slice(0, 120));
        return;
      }
      if (d.ok === 'skip') return;
      const msg = d.msg;
      if (msg.type === 'welcome') {
        welcomed = true;
        connects++;
        connectedSince = deps.clock.now();
        lastError = null;
        backoff.reset();
        log.info({ node_id: msg.node_id }, 'control channel connected');
        const w = waiters;
        waiters = [];
        for (const r of w) r();
      }
      emit(msg);
    });
    ws.on('error', (e) => {
      if (!refused) lastError = e.message;
    });
    ws.on('close', (code, reason) => {
      beat?.cancel();
      beat = null;
      if (socket === ws) socket = null;
      if (welcomed) log.info({ code, reason: reason.toString() }, 'control channel closed');
      welcomed = false;
      connectedSince = null;
      if (code === 1008 && reason.length > 0) lastError = reason.toString();
      scheduleReconnect(retryAfterS);
    });
  }

  return {
    name: 'control',
    attachSecret,
    get connected() {
      return welcomed;
    },
    on(type, fn) {
      let set = listeners.get(type);
      if (!set) {
        set = new Set();
        listeners.set(type, set);
      }
      set.add(fn as (msg: never) => void);
      return () => set.delete(fn as (msg: never) => void);
    },
    send(msg) {
      if (!socket || !welcomed || socket.readyState !== WebSocket.OPEN) return false;
      socket.send(JSON.stringify(msg));
      return true;
    },
    setAgentStatus(agentId, status) {
      if (status === null) {
        if (!presence.delete(agentId)) return;
      } else {
        if (presence.get(agentId) === status) return;
        presence.set(agentId, status);
      }
      const msg: AgentStatusMsg = { type: 'agent_status', agent_id: agentId, status: status ?? 'offline' };
      if (socket && welcomed && socket.readyState === WebSocket.OPEN) socket.send(JSON.stringify(msg));
    },
    waitConnected() {
      if (welcomed || stopped) return Promise.resolve();
      return new Promise((r) => waiters.push(r));
    },
    async start() {
      stopped = false;
      open();
    },
    async stop() {
      stopped = true;
      retry?.cancel();
      beat?.cancel();
      const w = waiters;
      waiters = [];
      for (const r of w) r();
      const s = socket;
      socket = null;
      if (s && s.readyState !== WebSocket.CLOSED) {
        await new Promise<void>((resolve) => {
          s.once('close', () => resolve());
          s.close(1001, 'svcd stopping');
          // A real timer: shutdown must not wait on an injected clock.
          setTimeout(() => {
            s.terminate();
            resolve();
          }, 2000).unref();
        });
      }
    },
    status() {
      return {
        connected: welcomed,
        url,
        connected_since: connectedSince === null ? null : new Date(connectedSince).toISOString(),
        connects,
        last_error: lastError,
      };
    },
  };
}
