// Which node and domain an agent is enrolled on: the one fact the node fetch needs from the
// agents area. Injected, so the secrets area does not depend on how enrolment is stored.
import { sql } from 'kysely';
import type { Db } from '../store/types.js';

export interface EnrolledAgent {
  id: string;
  node_id: string;
  domain_id: string;
}

export type AgentLookup = (db: Db, agentId: string) => Promise<EnrolledAgent | null>;

/**
 * Default lookup over the `agents` table (enrolment per node and domain, docs/mesh.md).
 * TODO(secrets): the agents table is created by the mesh-tasks area; if its columns differ
 * from (id, node_id, domain_id), adjust this one query.
 */
export const agentsTableLookup: AgentLookup = async (db, agentId) => {
  try {
    const res =
      await sql<EnrolledAgent>`select id, node_id, domain_id from agents where id = ${agentId}`.execute(db);
    return res.rows[0] ?? null;
  } catch (e) {
    // A tower without the agents table yet has no enrolled agents at all.
    if (isMissingTable(e)) return null;
    throw e;
  }
};

function isMissingTable(e: unknown): boolean {
  const err = e as { code?: string; message?: string };
  return err.code === '42P01' || /no such table: agents/.test(err.message ?? '');
}
