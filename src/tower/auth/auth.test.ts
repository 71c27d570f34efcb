import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { exportJWK, generateKeyPair, type JWK, SignJWT } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { STORES, startTestTower, type TestTower } from '../../../test/support/tower.js';
import { FakeClock } from '../../lib/clock.js';

/** A real OIDC issuer on loopback: discovery document + JWKS whose keys the test rotates. */
type PrivateKey = Awaited<ReturnType<typeof generateKeyPair>>['privateKey'];

async function startIssuer() {
  let keys: { kid: string; privateKey: PrivateKey; publicJwk: JWK }[] = [];
  let jwksFetches = 0;
  const server: Server = createServer((req, res) => {
    const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    if (req.url === '/.well-known/openid-configuration') {
      res.setHeader('content-type', 'application/json');
      res.end(JSON.stringify({ issuer: base, jwks_uri: `${base}/jwks` }));
    } else if (req.url === '/jwks') {
      jwksFetches++;
      res.setHeader('content-type', 'application/json');
      res.end(JSON.stringify({ keys: keys.map((k) => k.publicJwk) }));
    } else {
      res.statusCode = 404;
      res.end();
    }
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const issuer = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  async function addKey(kid: string) {
    const { privateKey, publicKey } = await generateKeyPair('RS256', { extractable: true });
    keys.push({
      kid,
      privateKey,
      publicJwk: { ...(await exportJWK(publicKey)), kid, alg: 'RS256', use: 'sig' },
    });
  }
  return {
    issuer,
    addKey,
    /** Replaces the key set with one new key (the old one is gone from the JWKS). */
    async rotate(kid: string) {
      keys = [];
      await addKey(kid);
    },
    get jwksFetches() {
      return jwksFetches;
    },
    async sign(
      claims: Record<string, unknown>,
      opts: { kid?: string; audience?: string; expSeconds?: number } = {},
    ) {
      const key = opts.kid ? keys.find((k) => k.kid === opts.kid) : keys[keys.length - 1];
      if (!key) throw new Error('no key');
      return new SignJWT(claims)
        .setProtectedHeader({ alg: 'RS256', kid: key.kid })
        .setIssuer(issuer)
        .setAudience(opts.audience ?? 'svc')
        .setSubject('alice')
        .setIssuedAt()
        .setExpirationTime(`${opts.expSeconds ?? 300}s`)
        .sign(key.privateKey);
    },
    close: () => new Promise<void>((r) => server.close(() => r())),
  };
}

describe.each(STORES)('auth on %s', (store) => {
  let t: TestTower;
  let issuer: Awaited<ReturnType<typeof startIssuer>>;
  let domA: string;
  let domB: string;

  beforeAll(async () => {
    issuer = await startIssuer();
    await issuer.addKey('k1');
    t = await startTestTower(store, {
      oidc: { issuer: issuer.issuer, audience: 'svc', jwksCooldownMs: 0 },
      rateLimit: { limit: 0, windowMs: 60_000 },
    });
    domA = (await t.call('POST', '/domains', { name: 'A' })).body.id as string;
    domB = (await t.call('POST', '/domains', { name: 'B' })).body.id as string;
  });
  afterAll(async () => {
    await t.close();
    await issuer.close();
  });

  async function token(scopes: string[], extra: Record<string, unknown> = {}): Promise<string> {
    const res = await t.call('POST', '/tokens', { name: 'test', scopes, ...extra });
    expect(res.status).toBe(201);
    return res.body.token as string;
  }

  it('answers 401 without a credential and with an unknown one', async () => {
    const none = await t.call('GET', '/domains', undefined, null);
    expect(none.status).toBe(401);
    expect(none.body.code).toBe('unauthenticated');
    expect((await t.call('GET', '/domains', undefined, 'svc_unknown')).status).toBe(401);
    expect((await t.call('GET', '/domains', undefined, 'garbage')).status).toBe(401);
  });

  it('answers 403 when the scope is too small', async () => {
    const reader = await token(['feed:read']);
    const res = await t.call('POST', `/domains/${domA}/m`, { name: 'x' }, reader);
    expect(res.status).toBe(403);
    expect(res.body.code).toBe('forbidden');
    expect((await t.call('GET', `/domains/${domA}/m`, undefined, reader)).status).toBe(200);
    const writer = await token(['work:write']);
    expect((await t.call('POST', '/domains', { name: 'nope' }, writer)).status).toBe(403);
    expect((await t.call('GET', '/tokens', undefined, writer)).status).toBe(403);
  });

  it('hides other domains behind 404 and lists only visible ones', async () => {
    const onlyA = await token(['work:write'], { domains: [domA] });
    expect((await t.call('GET', `/domains/${domA}`, undefined, onlyA)).status).toBe(200);
    const other = await t.call('GET', `/domains/${domB}`, undefined, onlyA);
    expect(other.status).toBe(404);
    expect(other.body.detail).toBe(`domain ${domB} not found`);
    expect((await t.call('POST', `/domains/${domB}/m`, { name: 'x' }, onlyA)).status).toBe(404);
    const mB = await t.call('POST', `/domains/${domB}/m`, { name: 'secret mission' });
    expect((await t.call('GET', `/domains/${domB}/m/${mB.body.id}`, undefined, onlyA)).status).toBe(404);
    const list = await t.call('GET', '/domains', undefined, onlyA);
    expect((list.body.items as { id: string }[]).map((d) => d.id)).toEqual([domA]);
  });

  it('stops accepting a revoked token', async () => {
    const tok = await token(['feed:read']);
    const created = await t.call('GET', '/tokens');
    const id = (created.body.items as { id: string; name: string }[]).at(-1)?.id;
    expect((await t.call('GET', '/domains', undefined, tok)).status).toBe(200);
    const revoked = await t.call('DELETE', `/tokens/${id}`);
    expect(revoked.status).toBe(200);
    expect(revoked.body.revoked_at).toEqual(expect.any(String));
    const after = await t.call('GET', '/domains', undefined, tok);
    expect(after.status).toBe(401);
    expect(after.body.detail).toBe('token revoked');
  });

  it('never returns token secrets in listings', async () => {
    await token(['feed:read']);
    const list = await t.call('GET', '/tokens');
    for (const item of list.body.items as Record<string, unknown>[]) {
      expect(Object.keys(item).sort()).toEqual([
        'created_at',
        'domains',
        'expires_at',
        'id',
        'name',
        'revoked_at',
        'scopes',
      ]);
    }
  });

  it('accepts a valid OIDC token with its scopes and domains, and rejects bad ones', async () => {
    const good = await issuer.sign({ scope: 'feed:read openid', svc_domains: [domA] });
    const ok = await t.call('GET', '/domains', undefined, good);
    expect(ok.status).toBe(200);
    expect((ok.body.items as { id: string }[]).map((d) => d.id)).toEqual([domA]);
    expect((await t.call('POST', `/domains/${domA}/m`, { name: 'x' }, good)).status).toBe(403);

    const wrongAudience = await issuer.sign({ scope: 'feed:read' }, { audience: 'other' });
    expect((await t.call('GET', '/domains', undefined, wrongAudience)).status).toBe(401);
    const expired = await issuer.sign({ scope: 'feed:read' }, { expSeconds: -10 });
    expect((await t.call('GET', '/domains', undefined, expired)).status).toBe(401);
    const tampered = `${good.slice(0, -4)}AAAA`;
    expect((await t.call('GET', '/domains', undefined, tampered)).status).toBe(401);
    // A user without a domains claim and without admin sees no domain.
    const noClaim = await issuer.sign({ scope: 'feed:read' });
    expect((await t.call('GET', '/domains', undefined, noClaim)).body.items).toEqual([]);
  });

  it('follows an issuer key rotation by kid', async () => {
    await issuer.rotate('k2');
    const rotated = await issuer.sign({ scope: 'admin' }, { kid: 'k2' });
    const fetchesBefore = issuer.jwksFetches;
    const res = await t.call('GET', `/domains/${domB}`, undefined, rotated);
    expect(res.status).toBe(200);
    expect(issuer.jwksFetches).toBeGreaterThan(fetchesBefore);
  });

  it('registers nodes with an admin or work:write token only, never with a node credential', async () => {
    const writer = await token(['work:write']);
    const byWriter = await t.call('POST', '/nodes', { hostname: `w-${store}` }, writer);
    expect(byWriter.status).toBe(201);
    expect(byWriter.body).toMatchObject({ hostname: `w-${store}`, jwt: expect.any(String) });
    const reader = await token(['feed:read']);
    const byReader = await t.call('POST', '/nodes', { hostname: `r-${store}` }, reader);
    expect([byReader.status, byReader.body.code]).toEqual([403, 'forbidden']);
    const byNode = await t.call('POST', '/nodes', { hostname: `n2-${store}` }, byWriter.body.jwt as string);
    expect([byNode.status, byNode.body.code]).toEqual([403, 'forbidden']);
  });

  it('registers a node whose JWT authenticates, and rotates it on forced re-registration', async () => {
    const first = await t.call('POST', '/nodes', { hostname: `n-${store}` });
    expect(first.status).toBe(201);
    const jwt1 = first.body.jwt as string;
    const asNode = await t.call('GET', `/nodes/${first.body.id}`, undefined, jwt1);
    expect(asNode.status).toBe(200);
    expect(asNode.body).toMatchObject({ id: first.body.id, hostname: `n-${store}`, online: false });

    const again = await t.call('POST', '/nodes', { hostname: `n-${store}` });
    expect(again.status).toBe(409);
    const forced = await t.call('POST', '/nodes', { hostname: `n-${store}`, force: true });
    expect(forced.status).toBe(200);
    expect(forced.body.id).toBe(first.body.id);
    t.tower.auth.invalidate();
    const stale = await t.call('GET', `/nodes/${first.body.id}`, undefined, jwt1);
    expect(stale.status).toBe(401);
    expect(
      (await t.call('GET', `/nodes/${first.body.id}`, undefined, forced.body.jwt as string)).status,
    ).toBe(200);
    // A node cannot administer: its scopes stop at work:write.
    expect((await t.call('GET', '/tokens', undefined, forced.body.jwt as string)).status).toBe(403);
  });

  it('keeps verifying node JWTs of older signing keys after a rotation, until the key is retired', async () => {
    const reg = await t.call('POST', '/nodes', { hostname: `rot-${store}` });
    const jwt = reg.body.jwt as string;
    const keys = (await t.call('GET', '/admin/signing-keys')).body.items as {
      kid: string;
      active: boolean;
    }[];
    const oldKid = keys.find((k) => k.active)?.kid;
    const rotated = await t.call('POST', '/admin/signing-keys/rotate');
    expect(rotated.status).toBe(201);
    expect(rotated.body.kid).not.toBe(oldKid);
    t.tower.auth.invalidate();
    expect((await t.call('GET', `/nodes/${reg.body.id}`, undefined, jwt)).status).toBe(200);
    expect((await t.call('POST', `/admin/signing-keys/${rotated.body.kid}/retire`)).status).toBe(409);
    expect((await t.call('POST', `/admin/signing-keys/${oldKid}/retire`)).status).toBe(200);
    t.tower.auth.invalidate();
    expect((await t.call('GET', `/nodes/${reg.body.id}`, undefined, jwt)).status).toBe(401);
  });
});

describe('token expiry', () => {
  it('answers 401 once a token with a TTL has expired', async () => {
    const clock = new FakeClock(Date.parse('2026-01-01T00:00:00Z'));
    const t = await startTestTower('sqlite', { clock });
    try {
      const res = await t.call('POST', '/tokens', { name: 'short', scopes: ['feed:read'], ttl_seconds: 60 });
      expect(res.body.expires_at).toBe('2026-01-01T00:01:00.000Z');
      const tok = res.body.token as string;
      expect((await t.call('GET', '/domains', undefined, tok)).status).toBe(200);
      await clock.advance(61_000);
      const after = await t.call('GET', '/domains', undefined, tok);
      expect(after.status).toBe(401);
      expect(after.body.detail).toContain('expired');
    } finally {
      await t.close();
    }
  });
});

describe('rate limits', () => {
  it('answers 429 with Retry-After once a principal exceeds its window, with RateLimit headers throughout', async () => {
    const clock = new FakeClock(Date.parse('2026-01-01T00:00:00Z'));
    const t = await startTestTower('sqlite', { clock, rateLimit: { limit: 3, windowMs: 60_000 } });
    try {
      const remaining: unknown[] = [];
      for (let i = 0; i < 3; i++) {
        const res = await t.call('GET', '/domains');
        expect(res.status).toBe(200);
        expect(res.headers['ratelimit-limit']).toBe('3');
        remaining.push(res.headers['ratelimit-remaining']);
      }
      expect(remaining).toEqual(['2', '1', '0']);
      const limited = await t.call('GET', '/domains');
      expect(limited.status).toBe(429);
      expect(limited.body.code).toBe('rate_limited');
      expect(limited.headers['retry-after']).toBe('60');
      expect(limited.headers['ratelimit-reset']).toBe('60');
      await clock.advance(60_000);
      expect((await t.call('GET', '/domains')).status).toBe(200);
    } finally {
      await t.close();
    }
  });
});
