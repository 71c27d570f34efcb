// Secret records in the store: versions sealed under the master key, grants to agents, and
// the node fetch decision. Every change emits a `matrix` event in its transaction; no event,
// listing or error built here carries a value.
import type { Kysely, Transaction } from 'kysely';
import { newId } from '../../lib/ids.js';
import { SvcError } from '../../protocol/errors.js';
import {
  SECRET_VERSIONS_KEPT,
  type SecretGrant,
  type SecretInfo,
  type SecretVersionInfo,
} from '../../protocol/secrets.js';
import type { Tx } from '../store/tx.js';
import type { Db, Tables } from '../store/types.js';
import { associatedData, type Sealed } from './crypto.js';
import type { Keyring } from './keyring.js';
import type { SecretRow, SecretTables, SecretVersionRow } from './migrations.js';

type All = Tables & SecretTables;
export type SDb = Kysely<All> | Transaction<All>;
export const sdb = (db: Db | Tx['db']): SDb => db as unknown as SDb;

export interface Sealer {
  keyId: string;
  seal(plaintext: string, aad: Buffer): Sealed;
}

export function secretNotFound(name: string, domainId: string): SvcError {
  return new SvcError('secret_not_found', `secret ${name} not found in domain ${domainId}`);
}

export async function findSecret(db: SDb, domainId: string, name: string): Promise<SecretRow | undefined> {
  return db
    .selectFrom('secrets')
    .selectAll()
    .where('domain_id', '=', domainId)
    .where('name', '=', name)
    .executeTakeFirst();
}

export async function requireSecret(db: SDb, domainId: string, name: string): Promise<SecretRow> {
  const row = await findSecret(db, domainId, name);
  if (!row) throw secretNotFound(name, domainId);
  return row;
}

/** Metadata of many secrets with their kept versions and grants, in the order given. */
export async function describeSecrets(db: SDb, rows: SecretRow[]): Promise<SecretInfo[]> {
  if (rows.length === 0) return [];
  const ids = rows.map((r) => r.id);
  const versions = await db
    .selectFrom('secret_versions')
    .select(['secret_id', 'version', 'created_at', 'created_by'])
    .where('secret_id', 'in', ids)
    .orderBy('secret_id')
    .orderBy('version', 'desc')
    .execute();
  const grants = await db
    .selectFrom('secret_grants')
    .select(['secret_id', 'agent_id', 'granted_at', 'granted_by'])
    .where('secret_id', 'in', ids)
    .orderBy('secret_id')
    .orderBy('agent_id')
    .execute();
  const vBy = new Map<string, SecretVersionInfo[]>();
  for (const v of versions) {
    const list = vBy.get(v.secret_id) ?? [];
    list.push({ version: Number(v.version), created_at: v.created_at, created_by: v.created_by });
    vBy.set(v.secret_id, list);
  }
  const gBy = new Map<string, SecretGrant[]>();
  for (const g of grants) {
    const list = gBy.get(g.secret_id) ?? [];
    list.push({ agent_id: g.agent_id, granted_at: g.granted_at, granted_by: g.granted_by });
    gBy.set(g.secret_id, list);
  }
  return rows.map((r) => ({
    id: r.id,
    domain_id: r.domain_id,
    name: r.name,
    description: r.description,
    version: Number(r.version),
    versions: vBy.get(r.id) ?? [],
    grants: gBy.get(r.id) ?? [],
    created_at: r.created_at,
    updated_at: r.updated_at,
  }));
}

export async function describeSecret(db: SDb, row: SecretRow): Promise<SecretInfo> {
  const [info] = await describeSecrets(db, [row]);
  return info!;
}

interface NewVersion {
  domainId: string;
  name: string;
  value: string;
  description?: string;
  actor: string;
  action: 'set' | 'rolled_back';
  extra?: Record<string, unknown>;
}

/**
 * Adds a version (creating the secret at version 1), seals the value under the current
 * key, prunes versions beyond the kept count. The version number is taken by an atomic
 * increment, so concurrent writers on PostgreSQL get distinct versions.
 */
async function appendVersion(
  tx: Tx,
  sealer: Sealer,
  v: NewVersion,
): Promise<{ row: SecretRow; created: boolean }> {
  const db = sdb(tx.db);
  let row: SecretRow | undefined;
  let created = false;
  for (let attempt = 0; attempt < 2 && !row; attempt++) {
    row = await db
      .updateTable('secrets')
      .set((eb) => ({
        version: eb('version', '+', 1),
        updated_at: tx.now,
        ...(v.description !== undefined ? { description: v.description } : {}),
      }))
      .where('domain_id', '=', v.domainId)
      .where('name', '=', v.name)
      .returningAll()
      .executeTakeFirst();
    if (row) break;
    row = await db
      .insertInto('secrets')
      .values({
        id: newId('sec', tx.nowMs),
        domain_id: v.domainId,
        name: v.name,
        description: v.description ?? '',
        version: 1,
        created_at: tx.now,
        updated_at: tx.now,
      })
      .onConflict((oc) => oc.columns(['domain_id', 'name']).doNothing())
      .returningAll()
      .executeTakeFirst();
    created = row !== undefined;
  }
  if (!row) throw new SvcError('conflict', `secret ${v.name} is being changed concurrently: retry`);
  const version = Number(row.version);
  const sealed = sealer.seal(v.value, associatedData(row.id, version));
  await db
    .insertInto('secret_versions')
    .values({
      secret_id: row.id,
      version,
      key_id: sealer.keyId,
      nonce: sealed.nonce,
      ciphertext: sealed.ciphertext,
      created_at: tx.now,
      created_by: v.actor,
    })
    .execute();
  await db
    .deleteFrom('secret_versions')
    .where('secret_id', '=', row.id)
    .where('version', '<=', version - SECRET_VERSIONS_KEPT)
    .execute();
  tx.emit({
    type: 'matrix',
    domain_id: v.domainId,
    payload: { entity: 'secret', action: v.action, id: row.id, name: v.name, version, ...v.extra },
  });
  return { row, created };
}

export function putSecret(
  tx: Tx,
  sealer: Sealer,
  input: { domainId: string; name: string; value: string; description?: string; actor: string },
): Promise<{ row: SecretRow; created: boolean }> {
  return appendVersion(tx, sealer, { ...input, action: 'set' });
}

function openVersion(keyring: Keyring, v: SecretVersionRow, name: string): string {
  try {
    return keyring.open(v.key_id, v, associatedData(v.secret_id, Number(v.version)));
  } catch (e) {
    throw new SvcError(
      'master_key_mismatch',
      `secret ${name} version ${v.version} cannot be decrypted (${(e as Error).message}): check the tower's master key`,
    );
  }
}

/** Makes a new version holding the value of an older kept one. */
export async function rollbackSecret(
  tx: Tx,
  sealer: Sealer,
  keyring: Keyring,
  input: { domainId: string; name: string; version: number; actor: string },
): Promise<SecretRow> {
  const db = sdb(tx.db);
  const secret = await requireSecret(db, input.domainId, input.name);
  const old = await db
    .selectFrom('secret_versions')
    .selectAll()
    .where('secret_id', '=', secret.id)
    .where('version', '=', input.version)
    .executeTakeFirst();
  if (!old) {
    throw new SvcError(
      'not_found',
      `secret ${input.name} has no kept version ${input.version}: "svc secret describe" lists the kept versions`,
    );
  }
  const value = openVersion(keyring, old, input.name);
  const { row } = await appendVersion(tx, sealer, {
    domainId: input.domainId,
    name: input.name,
    value,
    actor: input.actor,
    action: 'rolled_back',
    extra: { from_version: input.version },
  });
  return row;
}

export async function deleteSecret(tx: Tx, domainId: string, name: string): Promise<void> {
  const db = sdb(tx.db);
  const secret = await requireSecret(db, domainId, name);
  await db.deleteFrom('secret_grants').where('secret_id', '=', secret.id).execute();
  await db.deleteFrom('secret_versions').where('secret_id', '=', secret.id).execute();
  await db.deleteFrom('secrets').where('id', '=', secret.id).execute();
  tx.emit({
    type: 'matrix',
    domain_id: domainId,
    payload: { entity: 'secret', action: 'deleted', id: secret.id, name },
  });
}

export async function grantSecret(
  tx: Tx,
  input: { domainId: string; name: string; agentId: string; actor: string },
): Promise<{ grant: SecretGrant; created: boolean }> {
  const db = sdb(tx.db);
  const secret = await requireSecret(db, input.domainId, input.name);
  const existing = await db
    .selectFrom('secret_grants')
    .select(['agent_id', 'granted_at', 'granted_by'])
    .where('secret_id', '=', secret.id)
    .where('agent_id', '=', input.agentId)
    .executeTakeFirst();
  if (existing) return { grant: existing, created: false };
  const grant = { agent_id: input.agentId, granted_at: tx.now, granted_by: input.actor };
  await db
    .insertInto('secret_grants')
    .values({ secret_id: secret.id, ...grant })
    .onConflict((oc) => oc.columns(['secret_id', 'agent_id']).doNothing())
    .execute();
  tx.emit({
    type: 'matrix',
    domain_id: input.domainId,
    agent_id: input.agentId,
    payload: { entity: 'secret', action: 'granted', id: secret.id, name: input.name },
  });
  return { grant, created: true };
}

export async function revokeSecret(
  tx: Tx,
  input: { domainId: string; name: string; agentId: string },
): Promise<void> {
  const db = sdb(tx.db);
  const secret = await requireSecret(db, input.domainId, input.name);
  const res = await db
    .deleteFrom('secret_grants')
    .where('secret_id', '=', secret.id)
    .where('agent_id', '=', input.agentId)
    .executeTakeFirst();
  if (Number(res.numDeletedRows) === 0) {
    throw new SvcError('not_found', `secret ${input.name} is not granted to agent ${input.agentId}`);
  }
  tx.emit({
    type: 'matrix',
    domain_id: input.domainId,
    agent_id: input.agentId,
    payload: { entity: 'secret', action: 'revoked', id: secret.id, name: input.name },
  });
}

export type FetchOutcome =
  | { ok: true; secret: SecretRow; version: number; value: string }
  | { ok: false; error: SvcError };

/**
 * The node fetch decision for an agent already known to be enrolled in `domainId` on the
 * calling node: found, granted, decrypted. Refusals are returned (not thrown) so the caller
 * can commit their audit event.
 */
export async function fetchForAgent(
  db: SDb,
  keyring: Keyring,
  input: { domainId: string; name: string; agentId: string },
): Promise<FetchOutcome> {
  const secret = await findSecret(db, input.domainId, input.name);
  if (!secret) return { ok: false, error: secretNotFound(input.name, input.domainId) };
  const grant = await db
    .selectFrom('secret_grants')
    .select('agent_id')
    .where('secret_id', '=', secret.id)
    .where('agent_id', '=', input.agentId)
    .executeTakeFirst();
  if (!grant) {
    return {
      ok: false,
      error: new SvcError(
        'not_granted',
        `secret ${input.name} is not granted to agent ${input.agentId}: an operator can run "svc secret grant ${input.name} --domain ${input.domainId} --agent ${input.agentId}"`,
      ),
    };
  }
  const version = await db
    .selectFrom('secret_versions')
    .selectAll()
    .where('secret_id', '=', secret.id)
    .where('version', '=', secret.version)
    .executeTakeFirst();
  if (!version) return { ok: false, error: secretNotFound(input.name, input.domainId) };
  return {
    ok: true,
    secret,
    version: Number(secret.version),
    value: openVersion(keyring, version, input.name),
  };
}
