// Authenticator.recheck, what open connections' re-checks use: a fleet's node JWTs are
// checked in bulk (no second signature check, one query for many nodes), with the same
// verdicts a fresh lookup gives.
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { type FaultProxy, startFaultProxy } from '../../../test/support/fault-proxy.js';
import { STORES, startTestTower, type TestTower } from '../../../test/support/tower.js';
import { FakeClock } from '../../lib/clock.js';
import { openStore, type Store } from '../store/open.js';
import { Authenticator, type Recheck } from './authenticate.js';
import { SigningKeys } from './signing-keys.js';

const bearer = (jwt: string) => `Bearer ${jwt}`;

/** Registers a node on the test tower (again with `force`: its JWT rotates). */
async function registerNode(
  t: TestTower,
  hostname: string,
  force = false,
): Promise<{ id: string; jwt: string }> {
  const res = await t.call('POST', '/nodes', { hostname, ...(force ? { force: true } : {}) });
  return res.body as { id: string; jwt: string };
}

describe.each(STORES)('re-checking open connections’ credentials (%s)', (store) => {
  let t: TestTower;
  let keys: SigningKeys;
  let auth: Authenticator;
  const clock = new FakeClock(Date.parse('2026-11-27T10:00:00Z'));
  const register = (hostname: string, force = false) => registerNode(t, hostname, force);

  beforeAll(async () => {
    t = await startTestTower(store, { clock });
    const { db, dialect } = t.tower.store;
    keys = new SigningKeys(db, dialect, clock);
    auth = new Authenticator({ db, dialect, clock, keys, oidc: null });
  });
  afterAll(async () => {
    await t?.close();
  });

  it('answers each node JWT without verifying its signature again, and refuses rotated and unknown ones as a lookup would', async () => {
    const nodes = await Promise.all(['a', 'b', 'c'].map((h) => register(`recheck-${h}-${store}`)));
    for (const n of nodes) expect((await auth.fromHeader(bearer(n.jwt))).nodeId).toBe(n.id);
    const rotated = await register(`recheck-b-${store}`, true);
    const admin = `Bearer ${t.adminToken}`;
    const verify = vi.spyOn(keys, 'verifyNode');
    const headers = [...nodes.map((n) => bearer(n.jwt)), admin, 'Bearer svc_not_a_token', 'Basic x'];
    const v = await auth.recheck(headers);
    expect(verify).not.toHaveBeenCalled();
    expect(headers.map((h) => v.get(h))).toEqual([
      { ok: true },
      { ok: false, why: 'node token was rotated by a later registration: use the new node.json' },
      { ok: true },
      { ok: true },
      { ok: false, why: 'unknown token' },
      { ok: false, why: 'Authorization header must be "Bearer <token>"' },
    ]);
    expect(v.size).toBe(headers.length);
    // The rotated JWT is forgotten: the new one is verified once, then known.
    expect((await auth.recheck([bearer(rotated.jwt)])).get(bearer(rotated.jwt))).toEqual({ ok: true });
    expect(verify).toHaveBeenCalledTimes(1);
    verify.mockRestore();
  });

  it('refuses the JWT of a node whose row is gone, and keeps its neighbours', async () => {
    const gone = await register(`recheck-gone-${store}`);
    const kept = await register(`recheck-kept-${store}`);
    for (const n of [gone, kept]) await auth.fromHeader(bearer(n.jwt));
    await t.tower.store.db.deleteFrom('nodes').where('id', '=', gone.id).execute();
    const v = await auth.recheck([bearer(gone.jwt), bearer(kept.jwt)]);
    expect(v.get(bearer(gone.jwt))).toEqual({
      ok: false,
      why: 'node is not registered: run "svc agent node register"',
    });
    expect(v.get(bearer(kept.jwt))).toEqual({ ok: true });
    // Forgotten: a later lookup asks the store again (and is refused).
    await expect(auth.fromHeader(bearer(gone.jwt))).rejects.toThrow(/not registered/);
  });

  it('keeps a node’s new JWT and refuses its old one when both are re-checked in one pass', async () => {
    const old = await register(`recheck-both-${store}`);
    await auth.fromHeader(bearer(old.jwt));
    const fresh = await register(`recheck-both-${store}`, true);
    await auth.fromHeader(bearer(fresh.jwt));
    const v = await auth.recheck([bearer(old.jwt), bearer(fresh.jwt)]);
    expect(v.get(bearer(old.jwt))).toEqual({
      ok: false,
      why: 'node token was rotated by a later registration: use the new node.json',
    });
    expect(v.get(bearer(fresh.jwt))).toEqual({ ok: true });
  });

  it('keeps refusing a rotated JWT on later passes, though its header was re-checked before', async () => {
    const n = await register(`recheck-again-${store}`);
    await auth.fromHeader(bearer(n.jwt));
    // Two good passes: the header's node JWT is remembered between them.
    for (let i = 0; i < 2; i++)
      expect((await auth.recheck([bearer(n.jwt)])).get(bearer(n.jwt))).toEqual({ ok: true });
    await register(`recheck-again-${store}`, true);
    const rotated = {
      ok: false,
      why: 'node token was rotated by a later registration: use the new node.json',
    };
    expect((await auth.recheck([bearer(n.jwt)])).get(bearer(n.jwt))).toEqual(rotated);
    expect((await auth.recheck([bearer(n.jwt)])).get(bearer(n.jwt))).toEqual(rotated);
    await expect(auth.fromHeader(bearer(n.jwt))).rejects.toThrow(/rotated/);
  });

  it('refuses the JWTs of a retired signing key at the next re-check', async () => {
    const n = await register(`recheck-retired-${store}`);
    await auth.fromHeader(bearer(n.jwt));
    const listed = (await t.call('GET', '/admin/signing-keys')).body.items as {
      kid: string;
      active: boolean;
    }[];
    const current = listed.find((k) => k.active)?.kid as string;
    expect((await t.call('POST', '/admin/signing-keys/rotate')).status).toBe(201);
    expect((await t.call('POST', `/admin/signing-keys/${current}/retire`)).status).toBe(200);
    // The keys this replica read are re-read once they are a re-check period old.
    await clock.advance(500);
    const v = await auth.recheck([bearer(n.jwt)]);
    expect(v.get(bearer(n.jwt))).toEqual({ ok: false, why: `invalid node token: unknown key id ${current}` });
  });
});

// The store refusing or hanging is not a revocation: every open connection's verdict is
// 'unknown' (the credential watch keeps the streams and warns), within the store's deadline,
// and the first pass after it answers again gives the real verdicts.
describe('re-checking node JWTs while PostgreSQL refuses or hangs', () => {
  let t: TestTower;
  let proxy: FaultProxy;
  let proxied: Store;
  let auth: Authenticator;
  const clock = new FakeClock(Date.parse('2026-11-28T10:00:00Z'));
  const register = (hostname: string, force = false) => registerNode(t, hostname, force);

  beforeAll(async () => {
    t = await startTestTower('postgres', { clock });
    const url = new URL(t.databaseUrl as string);
    proxy = await startFaultProxy({ host: url.hostname, port: Number(url.port || 5432) });
    url.host = `127.0.0.1:${proxy.port}`;
    proxied = await openStore({
      database: url.toString(),
      dataDir: t.dataDir,
      timeouts: { connectTimeoutMs: 1000, statementTimeoutMs: 300 },
    });
    const keys = new SigningKeys(proxied.db, proxied.dialect, clock);
    auth = new Authenticator({ db: proxied.db, dialect: proxied.dialect, clock, keys, oidc: null });
  });
  afterAll(async () => {
    await proxied?.close();
    await proxy?.close();
    await t?.close();
  });

  it('answers unknown for every node, refuses none, and gives real verdicts once the store is back', async () => {
    const nodes = await Promise.all(['a', 'b'].map((h) => register(`recheck-fault-${h}`)));
    for (const n of nodes) expect((await auth.fromHeader(bearer(n.jwt))).nodeId).toBe(n.id);
    const headers = nodes.map((n) => bearer(n.jwt));
    const unknownFor = (v: Map<string, Recheck>) => headers.map((h) => v.get(h)?.ok);

    // Refused: the open connections reset, new ones refused.
    proxy.reset();
    await proxy.refuse();
    expect(unknownFor(await auth.recheck(headers))).toEqual(['unknown', 'unknown']);

    // Hanging: connections open but nothing answers; the pass ends at the statement deadline.
    await proxy.accept();
    proxy.stall();
    expect(unknownFor(await auth.recheck(headers))).toEqual(['unknown', 'unknown']);

    // Node b re-registers while this replica cannot see it; once the store answers, the
    // next pass keeps a and refuses b's old JWT.
    await register('recheck-fault-b', true);
    proxy.reset();
    proxy.resume();
    const v = await auth.recheck(headers);
    expect(v.get(headers[0] as string)).toEqual({ ok: true });
    expect(v.get(headers[1] as string)).toEqual({
      ok: false,
      why: 'node token was rotated by a later registration: use the new node.json',
    });
  });
});
