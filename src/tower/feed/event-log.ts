// Appends feed events inside the transaction of the change they describe. Ids must be
// strictly increasing in the order events become visible, so a reader that resumes after id
// N never misses a smaller id committed later. SQLite has one writer: the rowid is that
// order. On PostgreSQL the id comes from a sequence at insert and readers read
// `feed_events`, below a watermark every smaller id of which is settled (feed/sequencer.ts).
// Writers do not NOTIFY: PostgreSQL serializes the commits of notifying transactions, which
// capped writes at one fsync each.
import type { Transaction } from 'kysely';
import { iso } from '../../lib/clock.js';
import type { FeedEvent, NewEvent } from '../../protocol/events.js';
import type { BlockCodec, BlockMember } from '../store/event-blocks.js';
import type { Tables } from '../store/types.js';

/** Channel on which readers are told that newly numbered events are readable. */
export function notifyChannel(schema: string | null): string {
  return schema ? `svc_events_${schema}` : 'svc_events';
}

export async function appendEvents(
  trx: Transaction<Tables>,
  nowMs: number,
  events: NewEvent[],
): Promise<void> {
  if (events.length === 0) return;
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
}

export interface StoredEvent {
  id: string | number | null;
  ts: string;
  type: string;
  domain_id: string | null;
  mission_id: string | null;
  agent_id: string | null;
  status: string | null;
  /** Null: one event; else a block of `n` (store/types.ts EventRow). */
  n?: number | null;
  payload: string;
}

/**
 * The events of one stored row: itself, or each event of a block, in id order. A block's
 * payload is an array of whole events, or an area's compact form (an object), expanded by
 * the codec of `blocks` whose tag it carries: this module knows no area's compact form.
 */
export function eventsFromRow(row: StoredEvent, blocks: readonly BlockCodec[]): FeedEvent[] {
  if (row.n === null || row.n === undefined) return [eventFromRow(row)];
  const base = BigInt(row.id ?? 0);
  const parsed = JSON.parse(row.payload) as BlockMember[] | Record<string, unknown>;
  const members = Array.isArray(parsed) ? parsed : codecOf(parsed, blocks).expand(parsed);
  return members.map(([domain_id, mission_id, agent_id, status, payload], i) => ({
    id: String(base + BigInt(i)),
    ts: row.ts,
    type: row.type as FeedEvent['type'],
    domain_id,
    mission_id,
    agent_id,
    status,
    payload,
  }));
}

function codecOf(block: Record<string, unknown>, blocks: readonly BlockCodec[]): BlockCodec {
  for (const codec of blocks) if (Object.hasOwn(block, codec.tag)) return codec;
  throw new Error(`an event block of an unknown form (members ${Object.keys(block).join(', ')})`);
}

export function eventFromRow(row: StoredEvent): FeedEvent {
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
