// The fan-out's MQTT input: subscribes the configured topic filters on a broker and hands each
// message (topic, payload as parsed JSON or else text) to its owner. The mqtt client does the
// reconnecting (every second) and re-subscribes on each connect.
import type { MqttClient } from 'mqtt';
import type { Logger } from '../../lib/log.js';
import type { FanoutMqttConfig } from './config-section.js';

export interface MqttMessage {
  topic: string;
  /** JSON payloads parsed; anything else as UTF-8 text (binary as base64, with encoding). */
  payload: unknown;
  encoding: 'json' | 'text' | 'base64';
  retained: boolean;
}

/** JSON when it parses, UTF-8 text when it decodes, else base64. */
export function decodeMqttPayload(buf: Buffer): { payload: unknown; encoding: MqttMessage['encoding'] } {
  const text = buf.toString('utf8');
  const valid = Buffer.from(text, 'utf8').equals(buf);
  if (valid) {
    try {
      return { payload: JSON.parse(text), encoding: 'json' };
    } catch {
      return { payload: text, encoding: 'text' };
    }
  }
  return { payload: buf.toString('base64'), encoding: 'base64' };
}

/** The broker URL without any user info, for status and logs. */
export function redactBroker(url: string): string {
  try {
    const u = new URL(url);
    u.username = '';
    u.password = '';
    return u.toString().replace(/\/$/, '');
  } catch {
    return '(invalid url)';
  }
}

export class MqttInput {
  private client: MqttClient | null = null;
  private connected = false;
  private received = 0;
  private lastError: string | null = null;
  private subscribed = false;
  private starting: Promise<void> | null = null;
  private stopping = false;

  constructor(
    private readonly config: FanoutMqttConfig,
    private readonly clientId: string,
    private readonly log: Logger,
    private readonly onMessage: (m: MqttMessage) => void,
  ) {}

  /** Connects in the background; the MQTT client is loaded only when a broker is configured. */
  start(): void {
    this.starting = import('mqtt').then(
      ({ default: mqtt }) => {
        if (!this.stopping) this.connect(mqtt.connect);
      },
      (e: unknown) => {
        this.lastError = `cannot load the MQTT client: ${(e as Error).message}`;
        this.log.error({ err: e }, 'fan-out: MQTT client not loaded');
      },
    );
  }

  private connect(connect: typeof import('mqtt').connect): void {
    const client = connect(this.config.url, {
      clientId: this.clientId,
      reconnectPeriod: 1000,
      connectTimeout: 10_000,
      clean: true,
    });
    this.client = client;
    client.on('connect', () => {
      this.connected = true;
      this.lastError = null;
      client.subscribe(this.config.topics, { qos: this.config.qos }, (err) => {
        if (err) {
          this.lastError = `subscribe failed: ${err.message}`;
          this.log.warn({ err }, 'fan-out: MQTT subscribe failed');
        } else this.subscribed = true;
      });
    });
    client.on('close', () => {
      this.connected = false;
      this.subscribed = false;
    });
    client.on('error', (err) => {
      this.lastError = err.message;
      this.log.warn({ err: err.message }, 'fan-out: MQTT error');
    });
    client.on('message', (topic, payload, packet) => {
      this.received++;
      this.onMessage({ topic, ...decodeMqttPayload(payload), retained: packet.retain });
    });
  }

  async stop(): Promise<void> {
    this.stopping = true;
    await this.starting;
    const c = this.client;
    this.client = null;
    if (c) await c.endAsync(true);
  }

  status() {
    return {
      broker: redactBroker(this.config.url),
      topics: this.config.topics,
      connected: this.connected,
      subscribed: this.subscribed,
      received: this.received,
      last_error: this.lastError,
    };
  }
}
