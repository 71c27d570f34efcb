// The event log as clients see it: one row per event id, blocks expanded (a batch transition
// on PostgreSQL stores its events as one row, feed/migrations.ts version 12), in id order.
import { eventsFromRow } from '../../src/tower/feed/event-log.js';
import type { Db } from '../../src/tower/store/types.js';

export interface LoggedEvent {
  id: string;
  ts: string;
  type: string;
  domain_id: string | null;
  mission_id: string | null;
  agent_id: string | null;
  status: string | null;
  /** The payload's JSON text. */
  payload: string;
}

export async function loggedEvents(
  db: Db,
  from: 'events' | 'feed_events' = 'events',
): Promise<LoggedEvent[]> {
  const rows = await db.selectFrom(from).selectAll().orderBy('id').execute();
  return rows.flatMap((row) =>
    eventsFromRow(row).map((ev) => ({
      id: ev.id,
      ts: ev.ts,
      type: ev.type,
      domain_id: ev.domain_id,
      mission_id: ev.mission_id,
      agent_id: ev.agent_id,
      status: ev.status,
      payload: JSON.stringify(ev.payload),
    })),
  );
}
