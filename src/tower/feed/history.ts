// GET /events: the feed's recent history, newest first, paged backwards. A client shows it at
// once and then follows the stream from `last_event_id` (the newest id readable when the page
// was read), so nothing falls between the page and the live events (docs/feed.md).
import fp from 'fastify-plugin';
import { sql } from 'kysely';
import { ListQuery } from '../../protocol/common.js';
import { type EventType, EventTypeSchema, type FeedEvent, HistoryPage } from '../../protocol/events.js';
import { Type } from '../../protocol/type.js';
import type { Principal } from '../auth/principal.js';
import type { TowerApp } from '../http/app.js';
import { route } from '../http/route-schema.js';
import type { BlockCodec } from '../store/event-blocks.js';
import type { Store } from '../store/open.js';
import { eventsFromRow } from './event-log.js';
import { type FeedFilter, FeedHub } from './hub.js';

/** Stored rows one request reads at most: a page of rare events ends early, with a cursor. */
export const HISTORY_SCAN_ROWS = 2000;

const Ids = Type.Array(Type.String({ minLength: 1, maxLength: 100 }), { maxItems: 100 });
export const HistoryQuery = Type.Object(
  {
    domain_id: Type.Optional(Ids),
    mission_id: Type.Optional(Ids),
    type: Type.Optional(Type.Array(EventTypeSchema, { maxItems: 4 })),
    /** Events of one mesh task only (its `matrix` transitions and its `progress`). */
    task_id: Type.Optional(Type.String({ minLength: 1, maxLength: 100 })),
    /** Events with smaller ids than this (the `next_cursor` of the previous page). */
    before: Type.Optional(Type.String({ pattern: '^[0-9]{1,19}$' })),
    limit: ListQuery.properties.limit,
  },
  { additionalProperties: false },
);

/** Whether `ev` is about mesh task `taskId` (docs/events.md). */
function aboutTask(ev: FeedEvent, taskId: string): boolean {
  const p = ev.payload;
  return (p.entity === 'mesh_task' && p.id === taskId) || p.task_id === taskId;
}

export interface HistoryRequest {
  principal: Principal;
  filter: FeedFilter;
  taskId?: string;
  before: bigint | null;
  limit: number;
}

/**
 * Up to `limit` events visible to the principal and selected by the filter, newest first,
 * with ids below `before`. Reads at most HISTORY_SCAN_ROWS rows; `next_cursor` is the
 * smallest id looked at, so the next page goes on from there.
 */
export async function readHistory(
  store: Store,
  blocks: readonly BlockCodec[],
  r: HistoryRequest,
): Promise<HistoryPage> {
  const param = (id: bigint) => (store.dialect === 'sqlite' ? Number(id) : String(id));
  const head = await store.reader
    .selectFrom('feed_events')
    .select(sql<string | number>`id + coalesce(n, 1) - 1`.as('last'))
    .orderBy('id', 'desc')
    .limit(1)
    .executeTakeFirst();
  const newest = head ? BigInt(head.last) : 0n;
  const before = r.before === null || r.before > newest ? newest + 1n : r.before;
  const items: FeedEvent[] = [];
  let cursor = before;
  let scanned = 0;
  let exhausted = false;
  while (items.length < r.limit && scanned < HISTORY_SCAN_ROWS) {
    const take = Math.min(200, HISTORY_SCAN_ROWS - scanned);
    const rows = await store.reader
      .selectFrom('feed_events')
      .select(['id', 'ts', 'type', 'domain_id', 'mission_id', 'agent_id', 'status', 'n', 'payload'])
      .where('id', '<', param(cursor))
      .orderBy('id', 'desc')
      .limit(take)
      .execute();
    scanned += rows.length;
    for (const row of rows) {
      // A block's events, newest first; those at or above `before` were on an earlier page.
      for (const ev of eventsFromRow(row, blocks).reverse()) {
        if (items.length === r.limit || BigInt(ev.id) >= before) continue;
        if (!FeedHub.matches(r.principal, r.filter, ev)) continue;
        if (r.taskId !== undefined && !aboutTask(ev, r.taskId)) continue;
        items.push(ev);
      }
      cursor = BigInt(row.id ?? 0);
      if (items.length === r.limit) break;
    }
    if (rows.length < take) {
      exhausted = true;
      break;
    }
  }
  // A full page goes on below its oldest event (inside a block too); a page cut short by the
  // scan limit goes on below the rows it read; none once the oldest kept event was read.
  const oldest = items.at(-1);
  const next = items.length === r.limit && oldest ? oldest.id : exhausted ? null : String(cursor);
  return { items, next_cursor: next, last_event_id: String(newest) };
}

export interface HistoryRouteDeps {
  store: Store;
  /** The areas' compact block forms (store/event-blocks.ts), to read blocks with. */
  blocks: readonly BlockCodec[];
}

const historySchema = route({
  summary: 'The feed history, newest first',
  description:
    'A page of the events the caller may see, newest first; pass `next_cursor` as `before` for older ' +
    'ones, and follow the stream after `last_event_id` (docs/feed.md).',
  tags: ['feed'],
  querystring: HistoryQuery,
  response: { 200: HistoryPage },
});

export const historyRoutes = fp(
  async (app: TowerApp, deps: HistoryRouteDeps) => {
    app.get('/events', {
      config: { scope: 'feed:read' },
      schema: historySchema,
      handler: async (req) => {
        const q = req.query;
        const filter: FeedFilter = {};
        if (q.domain_id) filter.domainIds = q.domain_id;
        if (q.mission_id) filter.missionIds = q.mission_id;
        if (q.type) filter.types = q.type as EventType[];
        return readHistory(deps.store, deps.blocks, {
          principal: req.principal,
          filter,
          ...(q.task_id ? { taskId: q.task_id } : {}),
          before: q.before === undefined ? null : BigInt(q.before),
          limit: q.limit ?? 50,
        });
      },
    });
  },
  { name: 'svc-feed-history' },
);
