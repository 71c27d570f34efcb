import { describe, expect, it } from 'vitest';
import { FakeClock } from '../../lib/clock.js';
import { silentLogger } from '../../lib/log.js';
import { SvcError } from '../../protocol/errors.js';
import { parseBrokerRequest, type SecretFetched } from '../../protocol/secrets.js';
import { answer, type BrokerDeps } from './broker.js';
import { SecretCache } from './cache.js';
import { SessionRegistry } from './sessions.js';

function setup(opts: { cacheTtlMs?: number } = {}) {
  const clock = new FakeClock(1_700_000_000_000);
  const sessions = new SessionRegistry('/run/test/secrets.sock');
  const calls: { path: string; body: unknown }[] = [];
  let behaviour: 'ok' | 'hang' | Error = 'ok';
  let value = 'v1';
  const deps: BrokerDeps = {
    sessions,
    tower: {
      request<T>(_method: string, path: string, body?: unknown): Promise<T> {
        calls.push({ path, body });
        if (behaviour === 'hang') return new Promise<T>(() => {});
        if (behaviour instanceof Error) return Promise.reject(behaviour);
        const fetched: SecretFetched = { name: 'TOKEN', domain_id: 'dom_1', version: 1, value };
        return Promise.resolve(fetched as T);
      },
    },
    cache: opts.cacheTtlMs ? new SecretCache(clock, opts.cacheTtlMs) : null,
    log: silentLogger(),
    fetchTimeoutMs: 10_000,
    setTimeout: (fn, ms) => clock.setTimeout(fn, ms),
  };
  return {
    clock,
    sessions,
    calls,
    deps,
    set behaviour(b: 'ok' | 'hang' | Error) {
      behaviour = b;
    },
    set value(v: string) {
      value = v;
    },
  };
}

describe('parsing secrets.sock requests', () => {
  it('accepts exactly op, session and name', () => {
    expect(parseBrokerRequest({ op: 'get', session: 's', name: 'GITHUB_TOKEN' })).toEqual({
      op: 'get',
      session: 's',
      name: 'GITHUB_TOKEN',
    });
  });

  it('names what is wrong without echoing the input', () => {
    const cases: [unknown, string][] = [
      [null, 'request must be one JSON object'],
      [[1, 2], 'request must be one JSON object'],
      ['get', 'request must be one JSON object'],
      [{ session: 's', name: 'A' }, 'field "op" is required'],
      [{ op: 'put', session: 's', name: 'A' }, 'field "op" must be "get"'],
      [{ op: 'get', name: 'A' }, 'field "session" must be the string in SVC_SECRETS_SESSION'],
      [{ op: 'get', session: 42, name: 'A' }, 'field "session" must be the string'],
      [{ op: 'get', session: 's', name: 'has space' }, 'field "name" must be a secret name'],
      [{ op: 'get', session: 's' }, 'field "name" must be a secret name'],
      [{ op: 'get', session: 's', name: 'A', value: 'x' }, 'unknown field "value"'],
    ];
    for (const [input, message] of cases) {
      const r = parseBrokerRequest(input);
      expect('error' in r && r.error, JSON.stringify(input)).toContain(message);
    }
    const secretish = parseBrokerRequest({ op: 'get', session: 'sess-abcdef', name: 'bad name!' });
    expect('error' in secretish && secretish.error).not.toContain('sess-abcdef');
  });
});

describe('the broker decision', () => {
  it('serves a live session by fetching for its agent, and refuses it once revoked', async () => {
    const s = setup();
    const session = s.sessions.mint('agt_1');
    expect(session.env).toEqual({
      SVC_SECRETS_SOCKET: '/run/test/secrets.sock',
      SVC_SECRETS_SESSION: session.id,
    });
    expect(Buffer.from(session.id, 'base64url')).toHaveLength(32);
    const req = { op: 'get', session: session.id, name: 'TOKEN' };
    expect(await answer(s.deps, req)).toEqual({ ok: true, value: 'v1' });
    expect(s.calls).toEqual([{ path: '/secrets/TOKEN/fetch', body: { agent_id: 'agt_1' } }]);
    session.revoke();
    const r = await answer(s.deps, req);
    expect(r.ok === false && r.error.code).toBe('unknown_session');
    expect(s.calls).toHaveLength(1);
  });

  it('mints distinct sessions per run, each revoked on its own', () => {
    const s = setup();
    const a = s.sessions.mint('agt_1');
    const b = s.sessions.mint('agt_1');
    expect(a.id).not.toBe(b.id);
    a.revoke();
    expect([s.sessions.resolve(a.id), s.sessions.resolve(b.id)]).toEqual([null, 'agt_1']);
  });

  it('maps the tower answers to broker codes', async () => {
    const s = setup();
    const session = s.sessions.mint('agt_1').id;
    const cases: [Error | 'hang', string][] = [
      [new SvcError('not_granted', 'x'), 'not_granted'],
      [new SvcError('agent_not_found', 'x'), 'not_granted'],
      [new SvcError('secret_not_found', 'x'), 'secret_not_found'],
      [new SvcError('tower_unreachable', 'down'), 'tower_unreachable'],
      [new SvcError('unauthenticated', 'node token rotated'), 'tower_unreachable'],
      [new SvcError('rate_limited', 'slow down'), 'tower_unreachable'],
      [new Error('bug'), 'tower_unreachable'],
    ];
    for (const [behaviour, code] of cases) {
      s.behaviour = behaviour;
      const r = await answer(s.deps, { op: 'get', session, name: 'TOKEN' });
      expect(r.ok === false && r.error.code, behaviour === 'hang' ? 'hang' : behaviour.message).toBe(code);
    }
  });

  it('gives up on a silent tower after the fetch timeout', async () => {
    const s = setup();
    s.behaviour = 'hang';
    const pending = answer(s.deps, { op: 'get', session: s.sessions.mint('agt_1').id, name: 'TOKEN' });
    await s.clock.advance(9_999);
    let settled = false;
    void pending.then(() => {
      settled = true;
    });
    await s.clock.advance(0);
    expect(settled).toBe(false);
    await s.clock.advance(1);
    expect(await pending).toEqual({
      ok: false,
      error: { code: 'tower_unreachable', message: 'the tower did not answer in time: retry later' },
    });
    expect(s.clock.pending()).toBe(0);
  });

  it('fetches every time with the cache off, so a revocation applies at the next request', async () => {
    const s = setup();
    const session = s.sessions.mint('agt_1').id;
    await answer(s.deps, { op: 'get', session, name: 'TOKEN' });
    s.behaviour = new SvcError('not_granted', 'revoked');
    const r = await answer(s.deps, { op: 'get', session, name: 'TOKEN' });
    expect(r.ok === false && r.error.code).toBe('not_granted');
    expect(s.calls).toHaveLength(2);
  });

  it('answers from the cache within its TTL and fetches again after it', async () => {
    const s = setup({ cacheTtlMs: 30_000 });
    const session = s.sessions.mint('agt_1').id;
    const req = { op: 'get', session, name: 'TOKEN' };
    expect(await answer(s.deps, req)).toEqual({ ok: true, value: 'v1' });
    s.value = 'v2';
    await s.clock.advance(29_999);
    expect(await answer(s.deps, req)).toEqual({ ok: true, value: 'v1' });
    await s.clock.advance(1);
    expect(await answer(s.deps, req)).toEqual({ ok: true, value: 'v2' });
    expect(s.calls).toHaveLength(2);
    // Another agent never shares an entry.
    expect(await answer(s.deps, { ...req, session: s.sessions.mint('agt_2').id })).toEqual({
      ok: true,
      value: 'v2',
    });
    expect(s.calls.map((c) => c.body)).toEqual([
      { agent_id: 'agt_1' },
      { agent_id: 'agt_1' },
      { agent_id: 'agt_2' },
    ]);
  });
});
