import { chmodSync, readFileSync, statSync, unlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { createTestSchema, type TestSchema } from '../../../test/support/pg.js';
import { makeTempDir } from '../../../test/support/tmp.js';
import { silentLogger } from '../../lib/log.js';
import { createTower, type Tower } from '../tower.js';
import type { AgentLookup } from './agents.js';
import { keyIdOf } from './crypto.js';
import { formatKeyList, generateKey, parseKeyList } from './master-key.js';

const VALUE = 'pg-password-0a1b2c3d4e5f';

/** Starts towers on one store; each start may use its own data dir and SVC_MASTER_KEY. */
function harness() {
  const dirs: { dir: string; remove(): void }[] = [];
  const towers: Tower[] = [];
  let schema: TestSchema | null = null;
  let nodeJwt = '';
  let nodeId = '';
  const lookup: AgentLookup = async (_db, id) =>
    id === 'agt_1' ? { id, node_id: nodeId, domain_id: domainId } : null;
  let domainId = '';
  return {
    newDir() {
      const d = makeTempDir();
      dirs.push(d);
      return d.dir;
    },
    async usePostgres() {
      schema = await createTestSchema();
    },
    async start(dataDir: string, masterKey?: string): Promise<Tower> {
      const tower = await createTower({
        dataDir,
        log: silentLogger(),
        agentLookup: lookup,
        ...(schema ? { database: schema.url } : {}),
        ...(masterKey !== undefined ? { masterKey } : {}),
      });
      towers.push(tower);
      return tower;
    },
    async call(tower: Tower, method: string, url: string, body?: unknown, token?: string) {
      const admin = readFileSync(join(dirs[0]!.dir, 'admin.token'), 'utf8').trim();
      const res = await tower.app.inject({
        method: method as 'GET',
        url,
        headers: {
          authorization: `Bearer ${token ?? admin}`,
          ...(body !== undefined ? { 'content-type': 'application/json' } : {}),
        },
        ...(body !== undefined ? { payload: JSON.stringify(body) } : {}),
      });
      return {
        status: res.statusCode,
        body: (res.body ? JSON.parse(res.body) : {}) as Record<string, unknown>,
      };
    },
    /** Creates a domain, a node, a granted secret. */
    async seed(tower: Tower) {
      domainId = (await this.call(tower, 'POST', '/domains', { name: 'd' })).body.id as string;
      const node = await this.call(tower, 'POST', '/nodes', { hostname: 'n1' });
      nodeJwt = node.body.jwt as string;
      nodeId = node.body.id as string;
      expect(
        (await this.call(tower, 'PUT', `/secrets/S?domain_id=${domainId}`, { value: VALUE })).status,
      ).toBe(201);
      await this.call(tower, 'POST', `/secrets/S/grants?domain_id=${domainId}`, { agent_id: 'agt_1' });
    },
    get domainId() {
      return domainId;
    },
    async put(tower: Tower, name: string, value: string) {
      return this.call(tower, 'PUT', `/secrets/${name}?domain_id=${domainId}`, { value });
    },
    async fetch(tower: Tower) {
      return this.call(tower, 'POST', '/secrets/S/fetch', { agent_id: 'agt_1' }, nodeJwt);
    },
    async stop(tower: Tower) {
      await tower.stop();
    },
    async cleanup() {
      for (const t of towers) await t.stop();
      await schema?.drop();
      for (const d of dirs) d.remove();
    },
  };
}

async function startError(p: Promise<unknown>): Promise<{ code: string; message: string }> {
  try {
    await p;
  } catch (e) {
    return { code: (e as { code: string }).code, message: (e as Error).message };
  }
  throw new Error('expected the tower to refuse to start');
}

describe('master key at start', () => {
  let h: ReturnType<typeof harness>;
  afterEach(async () => {
    await h.cleanup();
  });

  it('creates master.key 0600 on first start and reuses it on the next', async () => {
    h = harness();
    const dir = h.newDir();
    const t1 = await h.start(dir);
    await h.seed(t1);
    const file = join(dir, 'master.key');
    expect((statSync(file).mode & 0o777).toString(8)).toBe('600');
    const first = readFileSync(file, 'utf8');
    await h.stop(t1);
    const t2 = await h.start(dir);
    expect(readFileSync(file, 'utf8')).toBe(first);
    expect((await h.fetch(t2)).body.value).toBe(VALUE);
    expect(first).not.toContain(VALUE);
  });

  it('starts without the key the database needs but keeps values sealed, saying how to fix it', async () => {
    h = harness();
    const dir = h.newDir();
    const t1 = await h.start(dir);
    await h.seed(t1);
    const keyId = (await h.call(t1, 'GET', '/admin/master-key')).body.key_id as string;
    await h.stop(t1);
    const saved = readFileSync(join(dir, 'master.key'), 'utf8');

    const expectSealed = async (tower: Tower, fragment: string) => {
      const refusals = [await h.fetch(tower), await h.put(tower, 'S', 'new value')];
      const rotate = await h.call(tower, 'POST', '/admin/master-key/rotate');
      // A key from SVC_MASTER_KEY is never rotated by the tower (409); a key file cannot be here.
      if (rotate.status !== 409) refusals.push(rotate);
      for (const res of refusals) {
        expect([res.status, res.body.code]).toEqual([503, 'unavailable']);
        expect(res.body.detail).toContain(fragment);
      }
      // Metadata, grants and every other area keep working.
      expect((await h.call(tower, 'GET', `/secrets/S?domain_id=${h.domainId}`)).body.version).toBe(1);
      expect((await h.call(tower, 'GET', '/domains')).status).toBe(200);
      expect((await h.call(tower, 'GET', '/admin/master-key')).body.problem).toContain(fragment);
    };

    const wrong = await h.start(dir, generateKey().toString('base64'));
    await expectSealed(wrong, `which need ${keyId}`);
    await h.stop(wrong);

    writeFileSync(join(dir, 'master.key'), formatKeyList([generateKey()]), { mode: 0o600 });
    const other = await h.start(dir);
    await expectSealed(other, `which need ${keyId}`);
    await h.stop(other);

    chmodSync(join(dir, 'master.key'), 0o644);
    const loose = await startError(h.start(dir));
    expect(loose.code).toBe('config_invalid');
    expect(loose.message).toContain('is accessible by group or others (mode 644)');

    unlinkSync(join(dir, 'master.key'));
    const none = await h.start(dir);
    await expectSealed(none, `secrets in the database are sealed under ${keyId}`);
    expect((await h.call(none, 'GET', '/admin/master-key')).body.key_id).toBeNull();
    // No new key is made up to hide the loss.
    expect(() => statSync(join(dir, 'master.key'))).toThrow();
    await h.stop(none);

    const bad = await startError(h.start(dir, 'c2VjcmV0'));
    expect(bad.message).toContain('SVC_MASTER_KEY: entry 1 is not a 32-byte key');

    writeFileSync(join(dir, 'master.key'), saved, { mode: 0o600 });
    const back = await h.start(dir);
    expect((await h.fetch(back)).body.value).toBe(VALUE);
  });

  it('rotates through SVC_MASTER_KEY in stages: add the new key, put it first, drop the old', async () => {
    h = harness();
    const oldKey = generateKey();
    const newKey = generateKey();
    const b64 = (k: Buffer) => k.toString('base64');
    const dir = h.newDir();
    const t1 = await h.start(dir, b64(oldKey));
    await h.seed(t1);
    await h.stop(t1);
    // The env source never writes a key file.
    expect(() => statSync(join(dir, 'master.key'))).toThrow();

    const stage1 = await h.start(dir, `${b64(oldKey)},${b64(newKey)}`);
    expect((await h.call(stage1, 'GET', '/admin/master-key')).body.versions_by_key).toEqual({
      [keyIdOf(oldKey)]: 1,
    });
    await h.stop(stage1);

    const stage2 = await h.start(dir, `${b64(newKey)}\n${b64(oldKey)}`);
    const status = await h.call(stage2, 'GET', '/admin/master-key');
    expect(status.body).toEqual({
      key_id: keyIdOf(newKey),
      source: 'env',
      previous_key_ids: [keyIdOf(oldKey)],
      versions_by_key: { [keyIdOf(newKey)]: 1 },
      problem: null,
    });
    const refused = await h.call(stage2, 'POST', '/admin/master-key/rotate');
    expect([refused.status, refused.body.code]).toEqual([409, 'conflict']);
    await h.stop(stage2);

    const stage3 = await h.start(dir, b64(newKey));
    expect((await h.fetch(stage3)).body.value).toBe(VALUE);
    await h.stop(stage3);
    const backToOld = await h.start(dir, b64(oldKey));
    const sealed = await h.fetch(backToOld);
    expect([sealed.status, sealed.body.code]).toEqual([503, 'unavailable']);
    expect(sealed.body.detail).toContain(`need ${keyIdOf(newKey)}`);
  });

  it('finishes a rotation interrupted after master.key listed both keys', async () => {
    h = harness();
    const dir = h.newDir();
    const t1 = await h.start(dir);
    await h.seed(t1);
    await h.stop(t1);
    const file = join(dir, 'master.key');
    const [oldKey] = parseKeyList(readFileSync(file, 'utf8'), file);
    const fresh = generateKey();
    // What rotateMasterKey writes first; the tower "crashed" before re-encrypting.
    writeFileSync(file, formatKeyList([fresh, oldKey!]), { mode: 0o600 });
    const t2 = await h.start(dir);
    expect((await h.call(t2, 'GET', '/admin/master-key')).body).toMatchObject({
      key_id: keyIdOf(fresh),
      previous_key_ids: [],
      versions_by_key: { [keyIdOf(fresh)]: 1 },
    });
    expect(parseKeyList(readFileSync(file, 'utf8'), file).map(keyIdOf)).toEqual([keyIdOf(fresh)]);
    expect((await h.fetch(t2)).body.value).toBe(VALUE);
  });

  it('serves secrets from a PostgreSQL replica only once it shares the first replica key', async () => {
    h = harness();
    await h.usePostgres();
    const dirA = h.newDir();
    const dirB = h.newDir();
    const a = await h.start(dirA);
    await h.seed(a);
    const keyA = parseKeyList(readFileSync(join(dirA, 'master.key'), 'utf8'), 'a')[0]!;
    const b = await h.start(dirB);
    const sealed = await h.fetch(b);
    expect([sealed.status, sealed.body.code]).toEqual([503, 'unavailable']);
    expect(sealed.body.detail).toContain(`sealed under ${keyIdOf(keyA)}`);
    expect(() => statSync(join(dirB, 'master.key'))).toThrow();
    await h.stop(b);
    // Shared through SVC_MASTER_KEY, the second replica serves the same secrets.
    const shared = await h.start(dirB, keyA.toString('base64'));
    expect((await h.fetch(shared)).body.value).toBe(VALUE);
  });

  it('lets the first replica to store a secret decide the key, and refuses writes from one with another key', async () => {
    h = harness();
    await h.usePostgres();
    const a = await h.start(h.newDir());
    const b = await h.start(h.newDir());
    // Both started on an empty store, each with a key of its own.
    await h.seed(a);
    const refused = await h.put(b, 'OTHER', 'value from b');
    expect([refused.status, refused.body.code]).toEqual([503, 'unavailable']);
    const keyA = (await h.call(a, 'GET', '/admin/master-key')).body.key_id as string;
    expect(refused.body.detail).toContain(`which need ${keyA}`);
    expect((await h.call(b, 'GET', `/secrets/OTHER?domain_id=${h.domainId}`)).body.code).toBe(
      'secret_not_found',
    );
    expect((await h.put(a, 'OTHER', 'value from a')).status).toBe(201);
  });
});
