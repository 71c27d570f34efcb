// secrets.sock over a real unix socket, with a fake DaemonContext around the broker.

import { spawnSync } from 'node:child_process';
import { mkdirSync, statSync } from 'node:fs';
import { createConnection } from 'node:net';
import { join } from 'node:path';
import fc from 'fast-check';
import { afterEach, describe, expect, it } from 'vitest';
import { fakeControl } from '../../../test/support/control.js';
import { makeTempDir } from '../../../test/support/tmp.js';
import { type Clock, FakeClock, systemClock } from '../../lib/clock.js';
import { silentLogger } from '../../lib/log.js';
import { SvcError } from '../../protocol/errors.js';
import { BROKER_ERROR_CODES, type BrokerReply, type SecretFetched } from '../../protocol/secrets.js';
import type { DaemonContext } from '../context.js';
import { daemonPaths } from '../paths.js';
import type { TowerApi } from '../tower-client/api.js';
import { createSecretsBroker, type SecretsBroker, type SecretsBrokerOptions } from './index.js';
import { SessionRegistry } from './sessions.js';

const VALUE = 'socket-test-secret-value-81f2';

/** A tower that knows one grant: agt_1 may read TOKEN. */
function fakeTower(): TowerApi {
  return {
    baseUrl: 'http://tower.invalid',
    async request<T>(_m: string, path: string, body?: unknown): Promise<T> {
      const agent = (body as { agent_id: string }).agent_id;
      const name = decodeURIComponent(/^\/secrets\/([^/]+)\/fetch$/.exec(path)?.[1] ?? '');
      if (name !== 'TOKEN') throw new SvcError('secret_not_found', `secret ${name} not found`);
      if (agent !== 'agt_1') throw new SvcError('not_granted', 'not granted');
      const r: SecretFetched = { name, domain_id: 'dom_1', version: 1, value: VALUE };
      return r as T;
    },
  };
}

function fakeContext(home: string, clock: Clock): DaemonContext {
  const paths = daemonPaths(home);
  mkdirSync(paths.svcdDir, { recursive: true, mode: 0o700 });
  return {
    clock,
    log: silentLogger(),
    paths,
    identity: { node_id: 'node_1', hostname: 'h', backend_url: 'http://tower.invalid', jwt: 'x' },
    env: {},
    state: undefined as unknown as DaemonContext['state'],
    tower: fakeTower(),
    events: { publish: async () => {} },
    secrets: new SessionRegistry(paths.secretsSock),
    control: fakeControl(),
    shutdown: new AbortController().signal,
  };
}

interface Answer {
  text: string;
  reset: boolean;
}

/** Connects, writes `data` (optionally half-closing), and collects everything until close. */
function ask(path: string, data: Buffer | string | null, opts: { end?: boolean } = {}): Promise<Answer> {
  return new Promise((resolve) => {
    const s = createConnection(path);
    let text = '';
    let reset = false;
    s.setEncoding('utf8');
    s.on('data', (d: string) => {
      text += d;
    });
    s.on('error', () => {
      reset = true;
    });
    s.on('close', () => resolve({ text, reset }));
    s.on('connect', () => {
      if (data !== null) s.write(data);
      if (opts.end !== false) s.end();
    });
  });
}

function parse(a: Answer): BrokerReply {
  expect(a.text.endsWith('\n'), a.text).toBe(true);
  expect(a.text.indexOf('\n')).toBe(a.text.length - 1);
  return JSON.parse(a.text) as BrokerReply;
}

const codeOf = (r: BrokerReply) => (r.ok ? 'ok' : r.error.code);

describe('secrets.sock', () => {
  const tmp: { remove(): void }[] = [];
  const brokers: SecretsBroker[] = [];
  afterEach(async () => {
    for (const b of brokers.splice(0)) await b.stop();
    for (const t of tmp.splice(0)) t.remove();
  });

  async function start(clock: Clock = systemClock, opts: SecretsBrokerOptions = {}) {
    const dir = makeTempDir('svc-sock-');
    tmp.push(dir);
    const ctx = fakeContext(dir.dir, clock);
    const broker = createSecretsBroker(ctx, opts);
    await broker.start();
    brokers.push(broker);
    const session = ctx.secrets.mint('agt_1');
    const req = (name = 'TOKEN', s = session.id) => JSON.stringify({ op: 'get', session: s, name });
    return { ctx, broker, path: ctx.paths.secretsSock, session, req };
  }

  it('answers a request ended by a newline, by a half-close, or by the object being complete', async () => {
    const { path, req } = await start();
    expect(parse(await ask(path, `${req()}\n`, { end: false }))).toEqual({ ok: true, value: VALUE });
    expect(parse(await ask(path, req()))).toEqual({ ok: true, value: VALUE });
    expect(parse(await ask(path, req(), { end: false }))).toEqual({ ok: true, value: VALUE });
    // Split across writes.
    const split = await new Promise<Answer>((resolve) => {
      const s = createConnection(path);
      let text = '';
      s.setEncoding('utf8');
      s.on('data', (d: string) => {
        text += d;
      });
      s.on('close', () => resolve({ text, reset: false }));
      const full = `${req()}\n`;
      s.write(full.slice(0, 10), () => s.write(full.slice(10)));
    });
    expect(parse(split)).toEqual({ ok: true, value: VALUE });
  });

  it('refuses unknown and revoked sessions, ungranted and missing secrets with their codes', async () => {
    const { ctx, path, req, session } = await start();
    const other = ctx.secrets.mint('agt_2');
    const cases: [string, string][] = [
      [req('TOKEN', 'not-a-session'), 'unknown_session'],
      [req('TOKEN', other.id), 'not_granted'],
      [req('MISSING'), 'secret_not_found'],
    ];
    for (const [body, code] of cases) expect(codeOf(parse(await ask(path, body)))).toBe(code);
    session.revoke();
    const revoked = parse(await ask(path, req()));
    expect(revoked).toEqual({
      ok: false,
      error: {
        code: 'unknown_session',
        message:
          'unknown or expired session: SVC_SECRETS_SESSION is valid only while the agent svcd started with it runs',
      },
    });
  });

  it('answers malformed input with bad_request saying what is wrong', async () => {
    const { path, session } = await start();
    const cases: [string, string][] = [
      ['', 'empty request'],
      ['\n', 'empty request'],
      ['{"op":"get",', 'request is not valid JSON'],
      ['not json at all', 'request is not valid JSON'],
      ['[1,2,3]', 'request must be one JSON object'],
      ['"get"', 'request must be one JSON object'],
      [`{"op":"get","session":${JSON.stringify(session.id)},"name":7}`, 'field "name" must be a secret name'],
      ['{"op":"set","session":"s","name":"A"}', 'field "op" must be "get"'],
      [
        '{"op":"get","session":["s"],"name":"A"}',
        'field "session" must be the string in SVC_SECRETS_SESSION',
      ],
      ['{"op":"get","session":"s","name":"A","extra":true}', 'unknown field "extra"'],
      ['\u0000\u0001\u0002\n', 'request is not valid JSON'],
    ];
    for (const [input, message] of cases) {
      const r = parse(await ask(path, input));
      expect(r.ok === false && r.error.code, JSON.stringify(input)).toBe('bad_request');
      expect(r.ok === false && r.error.message, JSON.stringify(input)).toContain(message);
    }
  });

  it('cuts off a 10 MiB line after the size cap, and the writer still reads the reply', async () => {
    const { path, req } = await start();
    const big = Buffer.alloc(10 * 1024 * 1024, 0x61);
    const a = await ask(path, big);
    expect(a.reset).toBe(false);
    expect(parse(a)).toEqual({
      ok: false,
      error: { code: 'bad_request', message: 'request larger than 65536 bytes' },
    });
    expect(parse(await ask(path, req()))).toEqual({ ok: true, value: VALUE });
  });

  it('times out silent and slow clients and lets go of clients that never close', async () => {
    const clock = new FakeClock(0);
    const { path, req } = await start(clock, { requestTimeoutMs: 5_000, lingerMs: 5_000 });
    const silent = ask(path, null, { end: false });
    const slow = ask(path, '{"op":"get","sess', { end: false });
    // Wait until both connections are accepted and their timers armed.
    for (let i = 0; i < 200 && clock.pending() < 2; i++) await new Promise((r) => setTimeout(r, 5));
    expect(clock.pending()).toBe(2);
    await clock.advance(5_000);
    for (const a of await Promise.all([silent, slow])) {
      expect(parse(a)).toEqual({
        ok: false,
        error: {
          code: 'bad_request',
          message: 'no complete request within 5000 ms: send one JSON object and a newline',
        },
      });
    }
    // A client that got its answer but keeps its side open is closed after the linger time.
    let closed = false;
    const lingering = ask(path, `${req()}\n`, { end: false }).then((a) => {
      closed = true;
      return a;
    });
    for (let i = 0; i < 200 && clock.pending() < 1; i++) await new Promise((r) => setTimeout(r, 5));
    expect(closed).toBe(false);
    await clock.advance(5_000);
    expect(parse(await lingering)).toEqual({ ok: true, value: VALUE });
  });

  it('keeps serving correct requests under random bytes, partial JSON and wrong types', async () => {
    const { path, req } = await start();
    const valid = req();
    const garbage = fc.oneof(
      fc.uint8Array({ maxLength: 300 }).map((b) => Buffer.from(b)),
      fc.nat({ max: valid.length - 1 }).map((n) => valid.slice(0, n)),
      fc
        .record({ op: fc.anything(), session: fc.anything(), name: fc.anything() }, { requiredKeys: [] })
        .map((o) => JSON.stringify(o) ?? 'undefined'),
      fc.anything().map((v) => JSON.stringify(v) ?? 'null'),
      fc.string({ unit: 'binary', maxLength: 200 }),
    );
    await fc.assert(
      fc.asyncProperty(garbage, async (input) => {
        const [bad, good] = await Promise.all([ask(path, input), ask(path, valid)]);
        const r = parse(bad);
        expect(r.ok).toBe(false);
        expect(BROKER_ERROR_CODES).toContain(codeOf(r));
        expect(bad.text).not.toContain(VALUE);
        expect(parse(good)).toEqual({ ok: true, value: VALUE });
      }),
      { numRuns: 150 },
    );
  });

  it('serves 500 concurrent connections, half of them garbage, answering each correctly', async () => {
    const { path, req } = await start();
    const answers = await Promise.all(
      Array.from({ length: 500 }, (_, i) => (i % 2 === 0 ? ask(path, req()) : ask(path, `{"op":${i}`))),
    );
    const codes = answers.map((a) => codeOf(parse(a)));
    expect(codes.filter((c) => c === 'ok')).toHaveLength(250);
    expect(codes.filter((c) => c === 'bad_request')).toHaveLength(250);
    expect(codes.every((c, i) => c === (i % 2 === 0 ? 'ok' : 'bad_request'))).toBe(true);
  });

  it('creates the socket 0600 in the 0700 directory, replaces a stale one, refuses a live one', async () => {
    const { ctx, broker, path, req } = await start();
    expect((statSync(path).mode & 0o777).toString(8)).toBe('600');
    expect((statSync(ctx.paths.svcdDir).mode & 0o777).toString(8)).toBe('700');
    const second = createSecretsBroker(ctx, {});
    await expect(second.start()).rejects.toThrow(`another svcd is already serving ${path}`);
    expect(parse(await ask(path, req())).ok).toBe(true);
    await broker.stop();
    expect(() => statSync(path)).toThrow();

    // A socket file left behind by a killed process is replaced.
    const stale = spawnSync(process.execPath, [
      '-e',
      `require('node:net').createServer().listen(${JSON.stringify(path)}, () => process.kill(process.pid, 'SIGKILL'))`,
    ]);
    expect(stale.signal).toBe('SIGKILL');
    expect(statSync(path).isSocket()).toBe(true);
    const again = createSecretsBroker(ctx, {});
    await again.start();
    brokers.push(again);
    expect(parse(await ask(path, req())).ok).toBe(true);
    expect((statSync(path).mode & 0o777).toString(8)).toBe('600');
  });

  it('reads its cache TTL from SVC_SECRETS_CACHE_TTL, off by default', async () => {
    const { brokerOptionsFromEnv } = await import('./index.js');
    expect(brokerOptionsFromEnv({})).toEqual({});
    expect(brokerOptionsFromEnv({ SVC_SECRETS_CACHE_TTL: '0' })).toEqual({});
    expect(brokerOptionsFromEnv({ SVC_SECRETS_CACHE_TTL: '30s' })).toEqual({ cacheTtlMs: 30_000 });
    expect(() => brokerOptionsFromEnv({ SVC_SECRETS_CACHE_TTL: 'soon' })).toThrow(
      'SVC_SECRETS_CACHE_TTL: invalid duration',
    );
    const dir = makeTempDir();
    tmp.push(dir);
    const ctx = fakeContext(join(dir.dir, 'home'), systemClock);
    expect(createSecretsBroker({ ...ctx, env: { SVC_SECRETS_CACHE_TTL: '1m' } }).status?.()).toMatchObject({
      cache_ttl_ms: 60_000,
    });
  });
});
