// Resolves the domain and mission a request names and checks the principal may see them.
// Anything it may not see is reported exactly like something that does not exist (404),
// so ids of other domains do not leak.
import { type SelectQueryBuilder, sql } from 'kysely';
import { SvcError } from '../../protocol/errors.js';
import type { Principal } from '../auth/principal.js';
import { canSeeDomain } from '../auth/principal.js';
import type { Db, DomainRow, MissionRow } from '../store/types.js';
import { decodeCursor, page } from './cursor.js';

export async function requireDomain(db: Db, p: Principal, domainId: string): Promise<DomainRow> {
  const row = canSeeDomain(p, domainId)
    ? await db.selectFrom('domains').selectAll().where('id', '=', domainId).executeTakeFirst()
    : undefined;
  if (!row) throw new SvcError('not_found', `domain ${domainId} not found`);
  return row;
}

/** The mission, checked against the principal's domains (and the domain in the path, if any). */
export async function requireMission(
  db: Db,
  p: Principal,
  missionId: string,
  domainId?: string,
): Promise<MissionRow> {
  const row = await db.selectFrom('missions').selectAll().where('id', '=', missionId).executeTakeFirst();
  if (!row || !canSeeDomain(p, row.domain_id) || (domainId !== undefined && row.domain_id !== domainId)) {
    throw new SvcError('not_found', `mission ${missionId} not found`);
  }
  return row;
}

/**
 * Which domains a list may show: null for any, an empty array for none, else these. `wanted`
 * is the list's domain filter, if any; asking for a domain the principal may not see shows
 * nothing (as if it were empty), never an error that would reveal it exists.
 */
export function listableDomains(p: Principal, wanted?: string): string[] | null {
  if (wanted !== undefined) return canSeeDomain(p, wanted) ? [wanted] : [];
  return p.domains;
}

/**
 * One page of a domain-scoped list: `sel` selects the rows with the list's own filters; this
 * adds the cursor, the principal's domains (and the `domain_id` filter), id order and
 * limit + 1, and maps each row. Every such table has `id` and `domain_id` columns.
 */
export async function listInDomains<
  DB,
  TB extends keyof DB,
  Row extends { id: string },
  Out extends { id: string },
>(
  sel: SelectQueryBuilder<DB, TB, Row>,
  p: Principal,
  q: { limit?: number | undefined; cursor?: string | undefined; domain_id?: string | undefined },
  map: (row: Row) => Out,
): Promise<{ items: Out[]; next_cursor: string | null }> {
  const limit = q.limit ?? 50;
  const after = decodeCursor(q.cursor);
  const domains = listableDomains(p, q.domain_id);
  if (domains?.length === 0) return { items: [], next_cursor: null };
  let s = sel.orderBy(sql`id`).limit(limit + 1);
  if (after !== null) s = s.where(sql<boolean>`id > ${after}`);
  if (domains) s = s.where(sql<boolean>`domain_id in (${sql.join(domains)})`);
  return page((await s.execute()).map(map), limit);
}
