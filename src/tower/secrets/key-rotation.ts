// The master key's lifecycle on the tower: where it comes from at start (SVC_MASTER_KEY or
// <data-dir>/master.key, created on first start), the start-up check that this tower holds
// every key the database needs, re-encryption of versions sealed under older keys, and
// online rotation. It never logs, returns or stores key material outside master.key.
import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import { type Kysely, sql } from 'kysely';
import type { Clock } from '../../lib/clock.js';
import { iso } from '../../lib/clock.js';
import type { Logger } from '../../lib/log.js';
import { SvcError } from '../../protocol/errors.js';
import type { MasterKeyRotated, MasterKeyStatus } from '../../protocol/secrets.js';
import type { Db, Dialect, Tables } from '../store/types.js';
import { associatedData, keyIdOf } from './crypto.js';
import { Keyring } from './keyring.js';
import { generateKey, MASTER_KEY_FILE, parseKeyList, readKeyFile, writeKeyFile } from './master-key.js';
import type { SecretTables } from './migrations.js';

type SDb = Kysely<Tables & SecretTables>;
const sdb = (db: Db): SDb => db as unknown as SDb;

const KEYRING_LOCK_NS = 0x5e60;
const REWRAP_BATCH = 100;

export interface MasterKeyOptions {
  dataDir: string;
  /** Text of SVC_MASTER_KEY (read at the CLI edge): overrides the key file. */
  masterKey?: string;
}

export interface MasterKeys {
  keyring: Keyring;
  source: 'file' | 'env';
  /** master.key path when source is file. */
  file: string | null;
  /** Serializes rotations in this process. */
  rotating: Promise<unknown> | null;
}

export interface KeyDeps {
  db: Db;
  dialect: Dialect;
  clock: Clock;
  log: Logger;
}

/**
 * Loads the master keys, refuses to start when the database needs a key this tower does
 * not hold, registers the current key, and re-encrypts versions sealed under older keys.
 */
export async function openMasterKeys(deps: KeyDeps, opts: MasterKeyOptions): Promise<MasterKeys> {
  const { db } = deps;
  let keys: Buffer[];
  let source: 'file' | 'env';
  let file: string | null = null;
  if (opts.masterKey !== undefined && opts.masterKey.trim() !== '') {
    keys = parseKeyList(opts.masterKey, 'SVC_MASTER_KEY');
    source = 'env';
  } else {
    source = 'file';
    file = join(opts.dataDir, MASTER_KEY_FILE);
    const read = await readKeyFile(file);
    if (read) {
      keys = read;
    } else {
      const registered = await sdb(db).selectFrom('secret_keyring').select('key_id').execute();
      if (registered.length > 0) {
        throw new SvcError(
          'config_invalid',
          `the database holds secrets sealed under master key ${registered.map((r) => r.key_id).join(', ')}, but ${file} does not exist: copy master.key from the tower that created them, or set SVC_MASTER_KEY`,
        );
      }
      keys = [generateKey()];
      await mkdir(opts.dataDir, { recursive: true, mode: 0o700 });
      await writeKeyFile(file, keys);
      deps.log.info({ file, key_id: keyIdOf(keys[0]!) }, 'created the master key for secrets');
    }
  }
  const mk: MasterKeys = { keyring: new Keyring(keys), source, file, rotating: null };
  await checkAndRegister(deps, mk.keyring);
  const rewrapped = await rewrap(deps, mk.keyring);
  if (rewrapped > 0) {
    deps.log.info(
      { key_id: mk.keyring.currentKeyId, rewrapped },
      're-encrypted secret versions under the current master key',
    );
  }
  await dropUnusedKeys(deps, mk);
  return mk;
}

async function checkAndRegister(deps: KeyDeps, keyring: Keyring): Promise<void> {
  await sdb(deps.db)
    .transaction()
    .execute(async (trx) => {
      if (deps.dialect === 'postgres') {
        await sql`select pg_advisory_xact_lock(${KEYRING_LOCK_NS}, hashtext(current_schema()))`.execute(trx);
      }
      const used = await trx.selectFrom('secret_versions').select('key_id').distinct().execute();
      const newest = await trx
        .selectFrom('secret_keyring')
        .select('key_id')
        .orderBy('created_at', 'desc')
        .orderBy('key_id', 'desc')
        .limit(1)
        .executeTakeFirst();
      const required = new Set(used.map((r) => r.key_id));
      if (newest) required.add(newest.key_id);
      const missing = [...required].filter((id) => !keyring.has(id));
      if (missing.length > 0) {
        throw new SvcError(
          'config_invalid',
          `this tower's master key (${keyring.keyIds.join(', ')}) cannot open the secrets in the database, which need ${missing.join(', ')}: restore that master.key, or list the missing key after the new one in SVC_MASTER_KEY (see docs/secrets.md, rotation)`,
        );
      }
      await trx
        .insertInto('secret_keyring')
        .values({ key_id: keyring.currentKeyId, created_at: iso(deps.clock.now()) })
        .onConflict((oc) => oc.column('key_id').doNothing())
        .execute();
    });
}

/** Re-encrypts every version not sealed under the current key; returns how many. */
export async function rewrap(deps: KeyDeps, keyring: Keyring): Promise<number> {
  const db = sdb(deps.db);
  const current = keyring.currentKeyId;
  let total = 0;
  for (;;) {
    const rows = await db
      .selectFrom('secret_versions')
      .select(['secret_id', 'version', 'key_id', 'nonce', 'ciphertext'])
      .where('key_id', '!=', current)
      .orderBy('secret_id')
      .orderBy('version')
      .limit(REWRAP_BATCH)
      .execute();
    if (rows.length === 0) return total;
    await db.transaction().execute(async (trx) => {
      for (const r of rows) {
        const aad = associatedData(r.secret_id, r.version);
        let plain: string;
        try {
          plain = keyring.open(r.key_id, r, aad);
        } catch (e) {
          throw new SvcError(
            'master_key_mismatch',
            `secret ${r.secret_id} version ${r.version} cannot be decrypted with master key ${r.key_id}: ${(e as Error).message}`,
          );
        }
        const sealed = keyring.sealWith(current, plain, aad);
        // Only if still sealed under the key we read: a concurrent re-encryption wins.
        const res = await trx
          .updateTable('secret_versions')
          .set({ key_id: current, nonce: sealed.nonce, ciphertext: sealed.ciphertext })
          .where('secret_id', '=', r.secret_id)
          .where('version', '=', r.version)
          .where('key_id', '=', r.key_id)
          .executeTakeFirst();
        total += Number(res.numUpdatedRows);
      }
    });
  }
}

/** After re-encryption, a key file keeps only the current key; SVC_MASTER_KEY is the operator's to edit. */
async function dropUnusedKeys(deps: KeyDeps, mk: MasterKeys): Promise<void> {
  const previous = mk.keyring.info().previousKeyIds;
  if (previous.length === 0) return;
  const stillUsed = await sdb(deps.db)
    .selectFrom('secret_versions')
    .select('key_id')
    .where('key_id', 'in', previous)
    .limit(1)
    .executeTakeFirst();
  if (stillUsed) return;
  if (mk.source === 'file' && mk.file) {
    const current = (await readKeyFile(mk.file))?.find((k) => keyIdOf(k) === mk.keyring.currentKeyId);
    if (!current) return;
    await writeKeyFile(mk.file, [current]);
    await mk.keyring.replace([current]);
    deps.log.info(
      { key_id: mk.keyring.currentKeyId, dropped: previous },
      'removed retired master keys from master.key',
    );
  } else {
    deps.log.info(
      { key_id: mk.keyring.currentKeyId, unused: previous },
      'every secret version is sealed under the first key of SVC_MASTER_KEY: the other keys can be removed from it',
    );
  }
}

export async function masterKeyStatus(db: Db, mk: MasterKeys): Promise<MasterKeyStatus> {
  const counts = await sdb(db)
    .selectFrom('secret_versions')
    .select(['key_id', sql<number | string>`count(*)`.as('n')])
    .groupBy('key_id')
    .orderBy('key_id')
    .execute();
  const info = mk.keyring.info();
  return {
    key_id: info.currentKeyId,
    source: mk.source,
    previous_key_ids: info.previousKeyIds,
    versions_by_key: Object.fromEntries(counts.map((c) => [c.key_id, Number(c.n)])),
  };
}

/**
 * Online rotation for a tower whose key lives in master.key: writes [new, old] (a crash
 * from here on is finished by the next start), switches encryption to the new key,
 * re-encrypts every version, then writes [new] alone.
 */
export async function rotateMasterKey(deps: KeyDeps, mk: MasterKeys): Promise<MasterKeyRotated> {
  if (mk.source !== 'file' || !mk.file) {
    throw new SvcError(
      'conflict',
      'the master key comes from SVC_MASTER_KEY, which the tower cannot rewrite: rotate by putting a new key first in SVC_MASTER_KEY and restarting (docs/secrets.md, rotation)',
    );
  }
  const file = mk.file;
  const run = async (): Promise<MasterKeyRotated> => {
    const held = (await readKeyFile(file)) ?? [];
    const old = held.find((k) => keyIdOf(k) === mk.keyring.currentKeyId);
    if (!old) {
      throw new SvcError(
        'conflict',
        `${file} no longer holds the running master key ${mk.keyring.currentKeyId}: restart the tower before rotating`,
      );
    }
    const fresh = generateKey();
    const previousKeyId = keyIdOf(old);
    await writeKeyFile(file, [fresh, old]);
    await sdb(deps.db)
      .insertInto('secret_keyring')
      .values({ key_id: keyIdOf(fresh), created_at: iso(deps.clock.now()) })
      .onConflict((oc) => oc.column('key_id').doNothing())
      .execute();
    await mk.keyring.replace([fresh, old]);
    const reencrypted = await rewrap(deps, mk.keyring);
    await writeKeyFile(file, [fresh]);
    await mk.keyring.replace([fresh]);
    deps.log.info(
      { key_id: keyIdOf(fresh), previous_key_id: previousKeyId, reencrypted },
      'rotated the master key',
    );
    return { key_id: keyIdOf(fresh), previous_key_id: previousKeyId, reencrypted };
  };
  const prior = mk.rotating ?? Promise.resolve();
  const next = prior.catch(() => {}).then(run);
  mk.rotating = next;
  try {
    return await next;
  } finally {
    if (mk.rotating === next) mk.rotating = null;
  }
}
