// Service tokens: opaque "svc_…" strings, stored only as SHA-256 hashes, with scopes, an
// optional domain list, an optional expiry, and revocation.
import { createHash } from 'node:crypto';
import { chmod, mkdir, writeFile } from 'node:fs/promises';
import { dirname } from 'node:path';
import { sql } from 'kysely';
import { newId, randomToken } from '../../lib/ids.js';
import type { Token, TokenCreate, TokenCreated } from '../../protocol/auth.js';
import { SvcError } from '../../protocol/errors.js';
import type { Scope } from '../../protocol/scopes.js';
import type { Tx, Write } from '../store/tx.js';
import type { Db, TokenRow } from '../store/types.js';

export const TOKEN_PREFIX = 'svc_';

export function hashToken(token: string): string {
  return createHash('sha256').update(token).digest('hex');
}

export function tokenFromRow(r: TokenRow): Token {
  return {
    id: r.id,
    name: r.name,
    scopes: JSON.parse(r.scopes) as Scope[],
    domains: r.domains === null ? null : (JSON.parse(r.domains) as string[]),
    expires_at: r.expires_at,
    revoked_at: r.revoked_at,
    created_at: r.created_at,
  };
}

export async function insertToken(tx: Tx, input: TokenCreate): Promise<TokenCreated> {
  const token = TOKEN_PREFIX + randomToken(32);
  const row: TokenRow = {
    id: newId('tok', tx.nowMs),
    name: input.name,
    token_hash: hashToken(token),
    scopes: JSON.stringify(input.scopes),
    domains: input.domains ? JSON.stringify(input.domains) : null,
    expires_at: input.ttl_seconds ? new Date(tx.nowMs + input.ttl_seconds * 1000).toISOString() : null,
    revoked_at: null,
    created_at: tx.now,
  };
  await tx.db.insertInto('tokens').values(row).execute();
  return { ...tokenFromRow(row), token };
}

export async function listTokens(db: Db): Promise<Token[]> {
  const rows = await db.selectFrom('tokens').selectAll().orderBy('id').execute();
  return rows.map(tokenFromRow);
}

/** Revokes a token; `visible` says whether the caller may see it (else it is not found). */
export async function revokeToken(
  write: Write,
  id: string,
  visible: (t: Token) => boolean = () => true,
): Promise<Token> {
  return write(async (tx) => {
    const row = await tx.db.selectFrom('tokens').selectAll().where('id', '=', id).executeTakeFirst();
    if (!row || !visible(tokenFromRow(row))) throw new SvcError('not_found', `token ${id} not found`);
    if (row.revoked_at === null) {
      await tx.db.updateTable('tokens').set({ revoked_at: tx.now }).where('id', '=', id).execute();
      row.revoked_at = tx.now;
    }
    return tokenFromRow(row);
  });
}

export async function findTokenByHash(db: Db, hash: string): Promise<TokenRow | undefined> {
  return db.selectFrom('tokens').selectAll().where('token_hash', '=', hash).executeTakeFirst();
}

const BOOTSTRAP_LOCK_NS = 0x5e5e;

/**
 * On a store with no tokens at all, creates an admin token and writes it to `file` (0600).
 * Two replicas starting together create one token: the check runs under a lock.
 * Returns the token when this call created it.
 */
export async function bootstrapAdminToken(
  write: Write,
  dialect: 'sqlite' | 'postgres',
  file: string,
): Promise<TokenCreated | null> {
  const created = await write(async (tx) => {
    if (dialect === 'postgres') {
      await sql`select pg_advisory_xact_lock(${BOOTSTRAP_LOCK_NS}, hashtext(current_schema()))`.execute(
        tx.db,
      );
    }
    const any = await tx.db.selectFrom('tokens').select('id').limit(1).executeTakeFirst();
    if (any) return null;
    return insertToken(tx, { name: 'admin (bootstrap)', scopes: ['admin'] });
  });
  if (created) {
    await mkdir(dirname(file), { recursive: true, mode: 0o700 });
    await writeFile(file, `${created.token}\n`, { mode: 0o600 });
    await chmod(file, 0o600);
  }
  return created;
}
