// Appends feed events inside the transaction of the change they describe. Ids must be
// strictly increasing in commit order, so a reader that resumes after id N never misses a
// smaller id committed later: on PostgreSQL the append takes a transaction-scoped advisory
// lock (held to commit) before drawing the id; SQLite has one writer anyway.
import { sql, type Transaction } from 'kysely';
import { iso } from '../../lib/clock.js';
import type { FeedEvent, NewEvent } from '../../protocol/events.js';
import type { Dialect, Tables } from '../store/types.js';

const EVENT_LOCK_NS = 0x5e5d;

export function notifyChannel(schema: string | null): string {
  return schema ? `svc_events_${schema}` : 'svc_events';
}

export async function appendEvents(
  trx: Transaction<Tables>,
  dialect: Dialect,
  schema: string | null,
  nowMs: number,
  events: NewEvent[],
): Promise<void> {
  if (events.length === 0) return;
  if (dialect === 'postgres') {
    await sql`select pg_advisory_xact_lock(${EVENT_LOCK_NS}, hashtext(current_schema()))`.execute(trx);
  }
  const ts = iso(nowMs);
  await trx
    .insertInto('events')
    .values(
      events.map((e) => ({
        ts,
        type: e.type,
        domain_id: e.domain_id ?? null,
        mission_id: e.mission_id ?? null,
        agent_id: e.agent_id ?? null,
        status: e.status ?? null,
        payload: JSON.stringify(e.payload),
      })),
    )
    .execute();
  if (dialect === 'postgres') {
    // Delivered at commit; only a wake-up, the table stays the source of truth.
    await sql`select pg_notify(${notifyChannel(schema)}, '')`.execute(trx);
  }
}

export function eventFromRow(row: {
  id: string | number;
  ts: string;
  type: string;
  domain_id: string | null;
  mission_id: string | null;
  agent_id: string | null;
  status: string | null;
  payload: string;
}): FeedEvent {
  return {
    id: String(row.id),
    ts: row.ts,
    type: row.type as FeedEvent['type'],
    domain_id: row.domain_id,
    mission_id: row.mission_id,
    agent_id: row.agent_id,
    status: row.status,
    payload: JSON.parse(row.payload) as Record<string, unknown>,
  };
}
