// The event log as clients see it: one row per event id, blocks expanded (a batch transition
// on PostgreSQL stores its events as one row, feed/migrations.ts version 12), in id order.

import { silentLogger } from '../../src/lib/log.js';
import type { FeedEvent } from '../../src/protocol/events.js';
import { eventsFromRow } from '../../src/tower/feed/event-log.js';
import { FeedHub } from '../../src/tower/feed/hub.js';
import { meshTaskBlocks } from '../../src/tower/mesh/event-codec.js';
import type { Db } from '../../src/tower/store/types.js';
import type { Tower } from '../../src/tower/tower.js';

/** A logged event with its payload as JSON text, as the row had it. */
export type LoggedEvent = Omit<FeedEvent, 'payload'> & { payload: string };

export async function loggedEvents(
  db: Db,
  from: 'events' | 'feed_events' = 'events',
): Promise<LoggedEvent[]> {
  const rows = await db.selectFrom(from).selectAll().orderBy('id').execute();
  return rows.flatMap((row) =>
    eventsFromRow(row, [meshTaskBlocks]).map((ev) => ({ ...ev, payload: JSON.stringify(ev.payload) })),
  );
}

/** A feed hub of its own on a test tower's store, woken by the tower's commits; stop() it. */
export async function startFeedHub(tower: Tower): Promise<FeedHub> {
  const hub = new FeedHub({
    store: tower.store,
    clock: tower.clock,
    log: silentLogger(),
    onLocalCommit: (listener) => tower.eventsCommitted.on(listener),
    blocks: [meshTaskBlocks],
  });
  await hub.start();
  return hub;
}
