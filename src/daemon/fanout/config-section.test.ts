import { describe, expect, it } from 'vitest';
import { isSvcError } from '../../protocol/errors.js';
import { parseTomlText } from '../config/toml.js';
import { parseSvcdConfig } from '../svcd-config.js';

const FILE = '/home/op/.svc/svcd/config.toml';
const parse = (text: string) => parseSvcdConfig(parseTomlText(FILE, text)).fanout;

function messageOf(fn: () => unknown): string {
  try {
    fn();
  } catch (e) {
    if (isSvcError(e)) return `${e.code}: ${e.message}`;
    throw e;
  }
  throw new Error('expected an error');
}

describe('[fanout] in config.toml', () => {
  it('is off by default, on the unix socket, with a 10 000-event buffer and a 1 s margin', () => {
    expect(parse('')).toEqual({
      enable: false,
      listen: { kind: 'unix', path: null },
      auth: 'token',
      bufferEvents: 10_000,
      holdMaxEvents: 10_000,
      holdMarginMs: 1000,
      types: [],
      domains: [],
      missions: [],
      mqtt: null,
    });
  });

  it('reads loopback TCP, filters and MQTT', () => {
    const c = parse(`
[fanout]
enable = true
listen = "127.0.0.1:8765"
types = ["approval", "matrix"]
domains = ["dom_1"]
hold_margin = "2s"
[fanout.mqtt]
url = "mqtt://127.0.0.1:1883"
topics = ["sensors/#", "alerts"]
qos = 1
`);
    expect(c.listen).toEqual({ kind: 'tcp', host: '127.0.0.1', port: 8765 });
    expect(c.types).toEqual(['approval', 'matrix']);
    expect(c.domains).toEqual(['dom_1']);
    expect(c.holdMarginMs).toBe(2000);
    expect(c.mqtt).toEqual({ url: 'mqtt://127.0.0.1:1883', topics: ['sensors/#', 'alerts'], qos: 1 });
    expect(parse('[fanout]\nlisten = "[::1]:0"').listen).toEqual({ kind: 'tcp', host: '::1', port: 0 });
    expect(parse('[fanout]\nlisten = "/run/user/1000/svc-events.sock"').listen).toEqual({
      kind: 'unix',
      path: '/run/user/1000/svc-events.sock',
    });
  });

  it('names the file, line and field of a bad value', () => {
    expect(messageOf(() => parse('[fanout]\nenable = true\nlisten = "0.0.0.0:8765"'))).toBe(
      `config_invalid: ${FILE}:3: fanout.listen: "0.0.0.0" is not a loopback address: the fan-out serves this node's feed to local consumers only (use 127.0.0.1, ::1 or a unix socket)`,
    );
    expect(messageOf(() => parse('[fanout]\nlisten = "events.sock"'))).toMatch(
      /fanout\.listen: must be "unix"/,
    );
    expect(messageOf(() => parse('[fanout]\nlisten = "rel/events.sock"'))).toMatch(/must be absolute/);
    expect(messageOf(() => parse('[fanout]\ntypes = ["bogus"]'))).toMatch(
      /:2: fanout\.types: unknown event type "bogus"/,
    );
    expect(messageOf(() => parse('[fanout]\nport = 1'))).toMatch(/fanout\.port: unknown field/);
    expect(messageOf(() => parse('[fanout.mqtt]\nurl = "http://x"\ntopics = ["a"]'))).toMatch(
      /fanout\.mqtt\.url: scheme must be mqtt/,
    );
    expect(
      messageOf(() => parse('[fanout.mqtt]\nurl = "mqtt://u:secret@127.0.0.1"\ntopics = ["a"]')),
    ).toMatch(/must not carry a password/);
    expect(messageOf(() => parse('[fanout.mqtt]\nurl = "mqtt://127.0.0.1"\ntopics = []'))).toMatch(
      /fanout\.mqtt\.topics: must not be empty/,
    );
    expect(messageOf(() => parse('[fanout.mqtt]\nurl = "mqtt://127.0.0.1"'))).toMatch(
      /fanout\.mqtt\.topics: is required/,
    );
  });
});
