// The master key's lifecycle on the tower: where it comes from at start (SVC_MASTER_KEY or
// <data-dir>/master.key, created on first start), the check that this tower holds every key
// the database needs, re-encryption of versions sealed under older keys, and online
// rotation. A tower whose keys cannot open the stored secrets still starts (records, feed
// and tasks keep working) but answers every value operation with `unavailable` naming the
// missing key. Nothing here logs, returns or stores key material outside master.key.
import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import { type Kysely, sql, type Transaction } from 'kysely';
import type { Clock } from '../../lib/clock.js';
import { iso } from '../../lib/clock.js';
import type { Logger } from '../../lib/log.js';
import { SvcError } from '../../protocol/errors.js';
import type { MasterKeyRotated, MasterKeyStatus } from '../../protocol/secrets.js';
import { transaction } from '../store/transaction.js';
import type { Tx } from '../store/tx.js';
import type { Db, Dialect, Tables } from '../store/types.js';
import { associatedData, keyIdOf } from './crypto.js';
import { Keyring } from './keyring.js';
import { generateKey, MASTER_KEY_FILE, parseKeyList, readKeyFile, writeKeyFile } from './master-key.js';
import type { SecretTables } from './migrations.js';

type All = Tables & SecretTables;
type SDb = Kysely<All> | Transaction<All>;
const sdb = (db: Db | Tx['db']): SDb => db as unknown as SDb;

const KEYRING_LOCK_NS = 0x5e60;
const REWRAP_BATCH = 100;

export interface MasterKeyOptions {
  dataDir: string;
  /** Text of SVC_MASTER_KEY (read at the CLI edge): overrides the key file. */
  masterKey?: string;
}

export interface MasterKeys {
  /** null when this tower has no key at all (key file lost while secrets exist). */
  keyring: Keyring | null;
  /** Why values cannot be sealed or opened here, or null when they can. */
  problem: string | null;
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
 * Loads the master keys and checks them against the database: every key a stored version
 * is sealed under, and the key most recently put to use, must be held. Then re-encrypts
 * versions sealed under older keys. Malformed key material refuses the start.
 */
export async function openMasterKeys(deps: KeyDeps, opts: MasterKeyOptions): Promise<MasterKeys> {
  const mk: MasterKeys = { keyring: null, problem: null, source: 'file', file: null, rotating: null };
  if (opts.masterKey !== undefined && opts.masterKey.trim() !== '') {
    mk.keyring = new Keyring(parseKeyList(opts.masterKey, 'SVC_MASTER_KEY'));
    mk.source = 'env';
  } else {
    const file = join(opts.dataDir, MASTER_KEY_FILE);
    mk.file = file;
    const read = await readKeyFile(file);
    if (read) {
      mk.keyring = new Keyring(read);
    } else {
      const registered = await sdb(deps.db).selectFrom('secret_keyring').select('key_id').execute();
      if (registered.length > 0) {
        // A new key here would only hide the loss: say what is missing instead.
        mk.problem = `this tower has no master key, and the secrets in the database are sealed under ${registered.map((r) => r.key_id).join(', ')}: copy master.key from the tower that has it to ${file}, or set SVC_MASTER_KEY, then restart`;
      } else {
        const key = generateKey();
        await mkdir(opts.dataDir, { recursive: true, mode: 0o700 });
        await writeKeyFile(file, [key]);
        mk.keyring = new Keyring([key]);
        deps.log.info({ file, key_id: keyIdOf(key) }, 'created the master key for secrets');
      }
    }
  }
  if (mk.keyring) {
    mk.problem = await missingKeysProblem(deps.db, mk.keyring);
    if (!mk.problem && (await newestKeyId(sdb(deps.db))) !== null) {
      await registerKey(sdb(deps.db), deps.clock, mk.keyring.currentKeyId);
      const rewrapped = await rewrap(deps, mk.keyring);
      if (rewrapped > 0) {
        deps.log.info(
          { key_id: mk.keyring.currentKeyId, rewrapped },
          're-encrypted secret versions under the current master key',
        );
      }
      await dropUnusedKeys(deps, mk, mk.keyring);
    }
  }
  if (mk.problem)
    deps.log.error({ source: mk.source }, `secrets are unavailable on this tower: ${mk.problem}`);
  return mk;
}

/** The keyring to seal or open values with; throws unavailable when this tower cannot. */
export function usableKeyring(mk: MasterKeys): Keyring {
  if (mk.problem || !mk.keyring) {
    throw new SvcError(
      'unavailable',
      `secrets are unavailable on this tower: ${mk.problem ?? 'no master key'}`,
    );
  }
  return mk.keyring;
}

async function newestKeyId(db: SDb): Promise<string | null> {
  const row = await db
    .selectFrom('secret_keyring')
    .select('key_id')
    .orderBy('created_at', 'desc')
    .orderBy('key_id', 'desc')
    .limit(1)
    .executeTakeFirst();
  return row?.key_id ?? null;
}

function missingMessage(keyring: Keyring, missing: string[]): string {
  return `this tower's master key (${keyring.keyIds.join(', ')}) cannot open the secrets in the database, which need ${missing.join(', ')}: restore that master.key, or list the missing key after the new one in SVC_MASTER_KEY (docs/secrets.md, rotation), then restart`;
}

async function missingKeysProblem(db: Db, keyring: Keyring): Promise<string | null> {
  const used = await sdb(db).selectFrom('secret_versions').select('key_id').distinct().execute();
  const required = new Set(used.map((r) => r.key_id));
  const newest = await newestKeyId(sdb(db));
  if (newest) required.add(newest);
  const missing = [...required].filter((id) => !keyring.has(id));
  return missing.length > 0 ? missingMessage(keyring, missing) : null;
}

/** Records a key as put to use; its first registration time never moves. */
async function registerKey(db: SDb, clock: Clock, keyId: string): Promise<void> {
  await db
    .insertInto('secret_keyring')
    .values({ key_id: keyId, created_at: iso(clock.now()) })
    .onConflict((oc) => oc.column('key_id').doNothing())
    .execute();
}

/**
 * Inside the transaction that seals a new version: the first writer of a fresh database
 * registers its key; a writer whose keys do not include the key most recently put to use
 * (another replica's key) is refused, and its secrets stay disabled until a restart with
 * the right key. Serialized across PostgreSQL replicas by an advisory lock.
 */
export async function claimKeyForWrite(
  tx: Tx,
  dialect: Dialect,
  clock: Clock,
  mk: MasterKeys,
  keyId: string,
): Promise<void> {
  const db = sdb(tx.db);
  if (dialect === 'postgres') {
    await sql`select pg_advisory_xact_lock(${KEYRING_LOCK_NS}, hashtext(current_schema()))`.execute(db);
  }
  const keyring = usableKeyring(mk);
  const newest = await newestKeyId(db);
  if (newest && !keyring.has(newest)) {
    mk.problem = missingMessage(keyring, [newest]);
    throw new SvcError('unavailable', `secrets are unavailable on this tower: ${mk.problem}`);
  }
  await registerKey(db, clock, keyId);
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
    await transaction(db as Kysely<All>, async (trx) => {
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
async function dropUnusedKeys(deps: KeyDeps, mk: MasterKeys, keyring: Keyring): Promise<void> {
  const previous = keyring.info().previousKeyIds;
  if (previous.length === 0) return;
  const stillUsed = await sdb(deps.db)
    .selectFrom('secret_versions')
    .select('key_id')
    .where('key_id', 'in', previous)
    .limit(1)
    .executeTakeFirst();
  if (stillUsed) return;
  if (mk.source === 'file' && mk.file) {
    const current = (await readKeyFile(mk.file))?.find((k) => keyIdOf(k) === keyring.currentKeyId);
    if (!current) return;
    await writeKeyFile(mk.file, [current]);
    await keyring.replace([current]);
    deps.log.info(
      { key_id: keyring.currentKeyId, dropped: previous },
      'removed retired master keys from master.key',
    );
  } else {
    deps.log.info(
      { key_id: keyring.currentKeyId, unused: previous },
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
  const info = mk.keyring?.info();
  return {
    key_id: info?.currentKeyId ?? null,
    source: mk.source,
    previous_key_ids: info?.previousKeyIds ?? [],
    versions_by_key: Object.fromEntries(counts.map((c) => [c.key_id, Number(c.n)])),
    problem: mk.problem,
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
    const keyring = usableKeyring(mk);
    const held = (await readKeyFile(file)) ?? [];
    const old = held.find((k) => keyIdOf(k) === keyring.currentKeyId);
    if (!old) {
      throw new SvcError(
        'conflict',
        `${file} no longer holds the running master key ${keyring.currentKeyId}: restart the tower before rotating`,
      );
    }
    const fresh = generateKey();
    const previousKeyId = keyIdOf(old);
    await writeKeyFile(file, [fresh, old]);
    // Hold the new key before announcing it, or a concurrent writer would find the newest
    // registered key missing from this keyring.
    await keyring.replace([fresh, old]);
    await registerKey(sdb(deps.db), deps.clock, keyIdOf(fresh));
    const reencrypted = await rewrap(deps, keyring);
    await writeKeyFile(file, [fresh]);
    await keyring.replace([fresh]);
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
