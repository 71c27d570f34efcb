// [fanout] table of config.toml (docs/fanout.md): whether svcd relays the tower feed
// to local consumers, where it listens, what it asks upstream for, and which MQTT topics it
// re-emits. Parsing only; fanout.ts acts on the result.
import { isIP } from 'node:net';
import { isAbsolute } from 'node:path';
import { EVENT_TYPES, type EventType } from '../../protocol/events.js';
import type { ConfigSection } from '../config/section.js';

/** Where local consumers connect. A unix socket is the default: access = file mode 0600. */
export type FanoutListen =
  | { kind: 'unix'; path: string | null }
  | { kind: 'tcp'; host: string; port: number };

export const AUTH_CHOICES = ['token', 'none'] as const;

export interface FanoutMqttConfig {
  url: string;
  topics: string[];
  qos: 0 | 1 | 2;
}

export interface FanoutConfig {
  enable: boolean;
  /** unix path null = $SVC_HOME/svcd/events.sock. */
  listen: FanoutListen;
  /** TCP only: "token" requires the bearer token of svcd/fanout.token (0600). */
  auth: (typeof AUTH_CHOICES)[number];
  /** Events kept for Last-Event-ID resume by local consumers. */
  bufferEvents: number;
  /** Events held in memory while rate-limited; past it svcd stops reading upstream and resumes by id. */
  holdMaxEvents: number;
  /** Extra wait after the upstream's rate_limit.reset_at before held events go out. */
  holdMarginMs: number;
  types: EventType[];
  domains: string[];
  missions: string[];
  mqtt: FanoutMqttConfig | null;
}

const LOOPBACK_NAMES = ['localhost', '127.0.0.1', '::1', '[::1]'];

/** "127.0.0.1:8765", "[::1]:0", "localhost:8765" → loopback TCP; anything with "/" → unix path. */
export function parseListen(v: string): FanoutListen {
  if (v === 'unix' || v === '') return { kind: 'unix', path: null };
  if (v.includes('/')) {
    if (!isAbsolute(v)) throw new Error(`a unix socket path must be absolute, got "${v}"`);
    return { kind: 'unix', path: v };
  }
  const m = /^(.+):(\d{1,5})$/.exec(v);
  if (!m) throw new Error(`must be "unix", an absolute socket path or a loopback "host:port", got "${v}"`);
  const host = (m[1] as string).replace(/^\[(.*)\]$/, '$1');
  const port = Number(m[2]);
  if (port > 65535) throw new Error(`port ${port} is out of range`);
  const loopback =
    LOOPBACK_NAMES.includes(host) || (isIP(host) === 4 && host.startsWith('127.')) || host === '::1';
  if (!loopback) {
    throw new Error(
      `"${host}" is not a loopback address: the fan-out serves this node's feed to local consumers only (use 127.0.0.1, ::1 or a unix socket)`,
    );
  }
  return { kind: 'tcp', host, port };
}

export const fanoutSection: ConfigSection<FanoutConfig> = {
  parse(t) {
    t?.onlyKeys([
      'enable',
      'listen',
      'auth',
      'buffer_events',
      'hold_max_events',
      'hold_margin',
      'types',
      'domains',
      'missions',
      'mqtt',
    ]);
    let listen: FanoutListen = { kind: 'unix', path: null };
    const rawListen = t?.string('listen');
    if (t && rawListen !== undefined) {
      try {
        listen = parseListen(rawListen);
      } catch (e) {
        throw t.error('listen', (e as Error).message);
      }
    }
    const types = t?.stringArray('types') ?? [];
    for (const ty of types) {
      if (!(EVENT_TYPES as readonly string[]).includes(ty)) {
        throw t?.error('types', `unknown event type "${ty}" (known: ${EVENT_TYPES.join(', ')})`);
      }
    }
    const m = t?.subtable('mqtt');
    let mqtt: FanoutMqttConfig | null = null;
    if (m) {
      m.onlyKeys(['url', 'topics', 'qos']);
      const url = m.requiredString('url');
      let parsed: URL;
      try {
        parsed = new URL(url);
      } catch {
        throw m.error('url', `must be a broker URL such as mqtt://127.0.0.1:1883, got "${url}"`);
      }
      if (!['mqtt:', 'mqtts:', 'ws:', 'wss:'].includes(parsed.protocol)) {
        throw m.error('url', `scheme must be mqtt, mqtts, ws or wss, got "${parsed.protocol}"`);
      }
      if (parsed.password) {
        // Secrets never sit in config files (docs/secrets.md).
        throw m.error('url', 'must not carry a password: config.toml is not a place for secrets');
      }
      const qos = m.integer('qos', 0, 2) ?? 0;
      mqtt = { url, topics: m.stringArray('topics', { nonEmpty: true }) ?? [], qos: qos as 0 | 1 | 2 };
      if (mqtt.topics.length === 0)
        throw m.error('topics', 'is required (MQTT topic filters, e.g. ["sensors/#"])');
    }
    return {
      enable: t?.boolean('enable') ?? false,
      listen,
      auth: t?.oneOf('auth', AUTH_CHOICES) ?? 'token',
      bufferEvents: t?.integer('buffer_events', 16, 1_000_000) ?? 10_000,
      holdMaxEvents: t?.integer('hold_max_events', 16, 1_000_000) ?? 10_000,
      holdMarginMs: t?.duration('hold_margin') ?? 1000,
      types: types as EventType[],
      domains: t?.stringArray('domains') ?? [],
      missions: t?.stringArray('missions') ?? [],
      mqtt,
    };
  },
};
