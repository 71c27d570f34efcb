// The event log's block rows as a storage format (feed/migrations.ts, version 12): how many
// events one row may hold, and the shape an area's compact block expands to. The feed reads
// blocks with the codecs the composition root hands it; this module knows no area's form.
import type { FeedEvent } from '../../protocol/events.js';

/**
 * Most events one row may hold as a block. On PostgreSQL the event id sequence steps by this
 * much, so the ids of a block never reach the next row's.
 */
export const EVENT_BLOCK_MAX = 1000;

/** A block's event written out whole: `[domain_id, mission_id, agent_id, status, payload]`. */
export type BlockMember = [
  FeedEvent['domain_id'],
  FeedEvent['mission_id'],
  FeedEvent['agent_id'],
  FeedEvent['status'],
  Record<string, unknown>,
];

/**
 * An area's compact block form: a block whose payload is a JSON object with a member named
 * `tag` is expanded by `expand` to its events written out whole, in id order. (A payload that
 * is an array is the whole form already.)
 */
export interface BlockCodec {
  tag: string;
  expand(block: Record<string, unknown>): BlockMember[];
}
