// svcd's local fan-out (docs/fanout.md): the component that wires the upstream
// follower, the rate-limit hold, the ring buffer, the local listener and the MQTT input, and
// assigns every local event its id. Its mgmt.sock methods are in methods.ts: `fanout.status`
// (svc system doctor reads it) and `events.subscribe` (subscribe.ts).

import { randomBytes } from 'node:crypto';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { type Clock, iso } from '../../lib/clock.js';
import type { Logger } from '../../lib/log.js';
import { SvcError } from '../../protocol/errors.js';
import type { FeedEvent } from '../../protocol/events.js';
import type { Component } from '../component.js';
import type { FanoutMetrics } from '../metrics.js';
import type { DaemonPaths } from '../paths.js';
import type { StateStore } from '../state/store.js';
import type { TowerApi } from '../tower-client/api.js';
import type { FanoutConfig } from './config-section.js';
import type { Entry, LocalEvent } from './consumer.js';
import { RateHold } from './hold.js';
import type { FanoutListener } from './listener.js';
import { MqttInput, type MqttMessage } from './mqtt.js';
import { FanoutPosition } from './position.js';
import { compareKeys, type EventKey, EventRing, formatEventKey, parseEventKey } from './ring.js';
import { Upstream } from './upstream.js';

/** What the fan-out uses of svcd (daemon.ts passes its DaemonContext). */
export interface FanoutContext {
  clock: Clock;
  log: Logger;
  paths: Pick<DaemonPaths, 'svcdDir'>;
  state: StateStore;
  /** The upstream feed is the tower's /events/stream. */
  tower: Pick<TowerApi, 'baseUrl'>;
  identity: { node_id: string; jwt: string };
}

export interface FanoutDeps {
  /** [fanout] of config.toml, as read at svcd start. */
  config: FanoutConfig;
  random?: () => number;
  /** Relay lag and subscribers are counted here (svcd's metrics). */
  metrics?: FanoutMetrics;
  /** svcd's metrics as Prometheus text, served as GET /metrics on the listener. */
  metricsText?: () => Promise<string>;
}

/** The upstream feed URL with the configured filters. */
export function upstreamUrl(
  baseUrl: string,
  c: Pick<FanoutConfig, 'types' | 'domains' | 'missions'>,
): string {
  const q = new URLSearchParams();
  for (const t of c.types) q.append('type', t);
  for (const d of c.domains) q.append('domain_id', d);
  for (const m of c.missions) q.append('mission_id', m);
  return `${baseUrl.replace(/\/$/, '')}/events/stream${q.size > 0 ? `?${q}` : ''}`;
}

/**
 * Orders and serializes what goes to local consumers. Tower events keep their ids; svcd's own
 * events take "<last tower id relayed>.<n>" so they sort between tower events (ring.ts).
 */
export class LocalSequence {
  private lastTower = 0n;
  private localSeq = 0;

  constructor(private readonly now: () => number) {}

  /** Continues after the event svcd relayed last before a restart. */
  continueAfter(k: EventKey): void {
    this.lastTower = k.tower;
    this.localSeq = k.local;
  }

  /** The tower's ids went back (a new tower database): number from `tower` on. */
  rebase(tower: bigint): void {
    this.lastTower = tower;
    this.localSeq = 0;
  }

  /** A tower event as a ring entry, or null when its id does not move forward (a duplicate). */
  tower(ev: FeedEvent, newest: EventKey | undefined): Entry | null {
    const key = parseEventKey(ev.id);
    if (key?.local !== 0) return null;
    if (newest && compareKeys(key, newest) <= 0) return null;
    this.lastTower = key.tower;
    this.localSeq = 0;
    const json = JSON.stringify(ev);
    return {
      key,
      id: ev.id,
      value: {
        name: 'message',
        meta: { type: ev.type, domain_id: ev.domain_id, mission_id: ev.mission_id },
        sse: `id: ${ev.id}\ndata: ${json}\n\n`,
        json,
      },
    };
  }

  /** An event svcd makes itself: a `matrix` event (SSE name `name`), or a `reset`. */
  local(name: string, payload: Record<string, unknown>): Entry {
    this.localSeq++;
    const key = { tower: this.lastTower, local: this.localSeq };
    const id = formatEventKey(key);
    let value: LocalEvent;
    if (name === 'reset') {
      const json = JSON.stringify(payload);
      value = {
        name,
        meta: null,
        sse: `id: ${id}\nevent: reset\ndata: ${json}\n\n`,
        json: JSON.stringify({ type: 'reset', id, ...payload }),
      };
    } else {
      const ev: FeedEvent = {
        id,
        ts: iso(this.now()),
        type: 'matrix',
        domain_id: null,
        mission_id: null,
        agent_id: null,
        status: null,
        payload,
      };
      const json = JSON.stringify(ev);
      value = {
        name,
        // matrix-down/-up reach every consumer; MQTT messages are `matrix` events like any other.
        meta: name === 'message' ? { type: 'matrix', domain_id: null, mission_id: null } : null,
        sse: `id: ${id}\n${name === 'message' ? '' : `event: ${name}\n`}data: ${json}\n\n`,
        json,
      };
    }
    return { key, id, value };
  }
}

export interface Fanout extends Component {
  /** What fanout.status answers. */
  details(): Record<string, unknown>;
  /** The running listener; throws the SvcError to answer when there is none (off, starting). */
  listener(): FanoutListener;
}

export function createFanout(ctx: FanoutContext, deps: FanoutDeps): Fanout {
  const log = ctx.log.child({ component: 'fanout' });
  let config: FanoutConfig | null = null;
  let ring: EventRing<LocalEvent> | null = null;
  let listener: FanoutListener | null = null;
  let upstream: Upstream | null = null;
  let hold: RateHold | null = null;
  let mqttIn: MqttInput | null = null;
  let tokenFile: string | null = null;
  let position: FanoutPosition | null = null;

  function details() {
    if (!config?.enable || !ring || !listener || !upstream || !hold) return { enabled: false };
    const oldest = ring.oldest();
    const newest = ring.newest();
    return {
      enabled: true,
      listen: listener.status().address,
      auth:
        config.listen.kind === 'tcp' && config.auth === 'token'
          ? 'token'
          : config.listen.kind === 'tcp'
            ? 'none'
            : 'unix-socket-0600',
      token_file: tokenFile,
      consumers: listener.status().consumers,
      buffer: {
        size: ring.size,
        capacity: ring.capacity,
        oldest_id: oldest?.id ?? null,
        newest_id: newest?.id ?? null,
      },
      upstream: upstream.status(),
      // Top level, as svc system doctor reads them: reconnect times, rate-limit holds.
      reconnects: upstream.reconnectTimes(),
      throttled: hold.holding,
      throttles: hold.throttles(),
      rate_limit: hold.status(),
      mqtt: mqttIn?.status() ?? null,
    };
  }
  return {
    name: 'fanout',
    details,
    listener() {
      if (config && !config.enable) {
        throw new SvcError(
          'unavailable',
          'the local fan-out is off: set [fanout] enable = true in config.toml and restart svcd (docs/fanout.md)',
        );
      }
      if (!listener) throw new SvcError('unavailable', 'svcd is still starting; retry');
      return listener;
    },
    async start() {
      const c = deps.config;
      config = c;
      if (!c.enable) return;
      const r = new EventRing<LocalEvent>(c.bufferEvents);
      ring = r;
      const seq = new LocalSequence(() => ctx.clock.now());
      const pos = new FanoutPosition(ctx.state, ctx.clock, (e) =>
        log.warn({ err: e }, 'fan-out: cannot save the relay position in state.db'),
      );
      position = pos;
      const saved = await pos.load();
      const savedKey = saved === null ? null : parseEventKey(saved);
      if (savedKey) {
        r.continueAfter(savedKey);
        seq.continueAfter(savedKey);
      }
      let token: string | null = null;
      if (c.listen.kind === 'tcp' && c.auth === 'token') {
        token = randomBytes(32).toString('base64url');
        tokenFile = join(ctx.paths.svcdDir, 'fanout.token');
        // A fresh token each start, readable by this user only (like mgmt.sock's 0600).
        await writeFile(tokenFile, `${token}\n`, { mode: 0o600 });
      }
      // Loaded only when the fan-out is on: it brings node:http and ws.
      const { FanoutListener } = await import('./listener.js');
      const l = new FanoutListener({
        ring: r,
        listen:
          c.listen.kind === 'unix'
            ? { kind: 'unix', path: c.listen.path ?? join(ctx.paths.svcdDir, 'events.sock') }
            : c.listen,
        token,
        clock: ctx.clock,
        log,
        ...(deps.metricsText ? { metrics: deps.metricsText } : {}),
      });
      listener = l;
      deps.metrics?.countSubscribers(() => l.status().consumers);
      const emit = (e: Entry | null) => {
        if (!e) return;
        r.push(e);
        l.broadcast(e);
        pos.save(e.id);
      };
      /** A tower event, relayed: its lag from the tower's timestamp is observed. */
      const relay = (ev: FeedEvent) => {
        const e = seq.tower(ev, r.lastKey());
        if (e) deps.metrics?.relayLag.observe(Math.max(0, ctx.clock.now() - Date.parse(ev.ts)) / 1000);
        emit(e);
      };
      const h = new RateHold({
        clock: ctx.clock,
        marginMs: c.holdMarginMs,
        release: (events) => {
          log.info({ events: events.length }, 'fan-out: rate-limit window reset; relaying held events');
          for (const ev of events) relay(ev);
        },
      });
      hold = h;
      const up = new Upstream({
        url: upstreamUrl(ctx.tower.baseUrl, c),
        jwt: ctx.identity.jwt,
        resumeAfter: savedKey ? String(savedKey.tower) : null,
        clock: ctx.clock,
        log,
        ...(deps.random ? { random: deps.random } : {}),
        // A full hold stops reading upstream; it resumes by id once the hold is released.
        ready: () => (h.heldCount >= c.holdMaxEvents ? h.whenReleased() : Promise.resolve()),
        handlers: {
          event(ev) {
            if (h.offer(ev) === 'pass') relay(ev);
            else if (h.heldCount >= c.holdMaxEvents) up.pause();
          },
          reset(info) {
            const after = parseEventKey(info.resume_after);
            const last = r.lastKey();
            if (after && last && after.tower < last.tower) {
              // The tower's ids started over: the old ones mean nothing in the new order.
              r.clear();
              seq.rebase(after.tower);
            }
            emit(
              seq.local('reset', {
                reason: `upstream_${info.reason}`,
                last_event_id: info.last_event_id,
                resume_after: info.resume_after,
              }),
            );
          },
          down(info) {
            emit(
              seq.local('matrix-down', {
                event: 'matrix-down',
                upstream: ctx.tower.baseUrl,
                status: info.status,
                error: info.error,
                retry_in_ms: info.retry_in_ms,
              }),
            );
          },
          up(info) {
            emit(
              seq.local('matrix-up', {
                event: 'matrix-up',
                upstream: ctx.tower.baseUrl,
                down_for_ms: info.down_for_ms,
                attempts: info.attempts,
              }),
            );
          },
        },
      });
      upstream = up;
      const address = await l.listen();
      up.start();
      if (c.mqtt) {
        const m = new MqttInput(
          c.mqtt,
          `svcd-${ctx.identity.node_id}-${randomBytes(4).toString('hex')}`,
          log,
          (msg: MqttMessage) =>
            emit(
              seq.local('message', {
                source: 'mqtt',
                topic: msg.topic,
                payload: msg.payload,
                encoding: msg.encoding,
                retained: msg.retained,
              }),
            ),
        );
        mqttIn = m;
        m.start();
      }
      log.info({ listen: address, upstream: ctx.tower.baseUrl }, 'fan-out serving /events');
    },
    async stop() {
      await upstream?.stop();
      await mqttIn?.stop();
      hold?.stop();
      await position?.flush();
      await listener?.close();
      listener = null;
      deps.metrics?.countSubscribers(null);
      upstream = null;
      mqttIn = null;
    },
    status() {
      if (!config?.enable || !listener || !upstream || !hold) return { enabled: false };
      return {
        enabled: true,
        listen: listener.status().address,
        consumers: listener.status().consumers,
        upstream: upstream.status().state,
        holding: hold.holding,
      };
    },
  };
}
