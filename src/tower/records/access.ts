// Resolves the domain and mission a request names and checks the principal may see them.
// Anything it may not see is reported exactly like something that does not exist (404),
// so ids of other domains do not leak.
import { SvcError } from '../../protocol/errors.js';
import type { Principal } from '../auth/principal.js';
import { canSeeDomain } from '../auth/principal.js';
import type { Db, DomainRow, MissionRow } from '../store/types.js';

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
