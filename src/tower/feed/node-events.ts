// Events published by svcd (POST /nodes/events): agent lifecycle, progress, cron fires. Each
// carries the node's key for it, so a batch retried after a lost reply lands once; the node id
// is stamped by the tower, never taken from the body.
//
// On PostgreSQL a batch is one statement: the keys not seen before are inserted (ON CONFLICT
// DO NOTHING) and the events of exactly those keys appended, in the batch's order, in one
// implicit transaction. As a general write it was five round trips (BEGIN, read the keys,
// insert them, the events, COMMIT), each waiting for the replica's event loop and for the
// CPU: with thousands of feed streams being written on a busy machine a publish took 300 ms
// p50 that way, and svcd's publishes queued behind each other (docs/perf-notes.md, feed-fleet).
import type { NodeEventsBody } from '../../protocol/events.js';
import type { Write } from '../store/tx.js';

/** Appends the events of `body` whose keys `nodeId` has not published before; returns how many. */
export async function publishNodeEvents(
  write: Write,
  dialect: 'sqlite' | 'postgres',
  nodeId: string,
  body: NodeEventsBody,
  nowIso: () => string,
): Promise<number> {
  if (dialect === 'postgres') return publishInOneStatement(write, nodeId, body, nowIso());
  return write(async (tx) => {
    const keys = body.events.map((e) => `${nodeId}:${e.key}`);
    const seen = new Set(
      (await tx.db.selectFrom('node_event_keys').select('key').where('key', 'in', keys).execute()).map(
        (r) => r.key,
      ),
    );
    let n = 0;
    for (const e of body.events) {
      const key = `${nodeId}:${e.key}`;
      if (seen.has(key)) continue;
      seen.add(key);
      await tx.db.insertInto('node_event_keys').values({ key, created_at: tx.now }).execute();
      tx.emit({
        type: e.type,
        domain_id: e.domain_id ?? null,
        mission_id: e.mission_id ?? null,
        agent_id: e.agent_id ?? null,
        status: e.status ?? null,
        payload: { ...e.payload, node_id: nodeId },
      });
      n++;
    }
    return n;
  });
}

// The batch as parallel arrays; `distinct on` keeps the first of a key given twice in one
// batch. The events go in last, as the sequencer wants of every writer (feed/sequencer.ts).
const PUBLISH_SQL = `with batch as (
    select distinct on (key) key, type, domain_id, mission_id, agent_id, status, payload, ord
    from unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[])
      with ordinality as b(key, type, domain_id, mission_id, agent_id, status, payload, ord)
    order by key, ord
  ), fresh as (
    insert into node_event_keys (key, created_at) select key, $8 from batch
    on conflict (key) do nothing returning key
  )
  insert into events (ts, type, domain_id, mission_id, agent_id, status, payload)
  select $8, b.type, b.domain_id, b.mission_id, b.agent_id, b.status, b.payload
  from batch b join fresh f on f.key = b.key order by b.ord
  returning 1`;

async function publishInOneStatement(
  write: Write,
  nodeId: string,
  body: NodeEventsBody,
  now: string,
): Promise<number> {
  const cols: (string | null)[][] = [[], [], [], [], [], [], []];
  for (const e of body.events) {
    const row = [
      `${nodeId}:${e.key}`,
      e.type,
      e.domain_id ?? null,
      e.mission_id ?? null,
      e.agent_id ?? null,
      e.status ?? null,
      JSON.stringify({ ...e.payload, node_id: nodeId }),
    ];
    for (const [i, v] of row.entries()) cols[i]?.push(v);
  }
  const rows = await write.statement<unknown>(
    { name: 'svc_node_events_publish', text: PUBLISH_SQL, values: [...cols, now], rowMode: 'array' },
    (r) => r.length > 0,
  );
  return rows.length;
}
