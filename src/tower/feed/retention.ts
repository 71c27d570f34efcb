// Background pruning of the event log (default retention 7 days) and of the idempotency keys
// of node-published events. The newest event is never deleted, so ids never go backwards
// (SQLite would otherwise reuse them). The highest id deleted is recorded (event_pruned), so
// a resume from below it is answered with a `reset` and any other resume is not (feed/hub.ts).

import { sql } from 'kysely';
import type { Clock, TimerHandle } from '../../lib/clock.js';
import { iso } from '../../lib/clock.js';
import type { Logger } from '../../lib/log.js';
import type { Store } from '../store/open.js';

const BATCH = 5000;
export const PRUNE_EVERY_MS = 10 * 60_000;

export async function pruneEvents(store: Store, nowMs: number, retentionMs: number): Promise<number> {
  const cutoff = iso(nowMs - retentionMs);
  const { db } = store;
  const newest = await db
    .selectFrom('events')
    .select((eb) => eb.fn.max('id').as('max'))
    .where('id', 'is not', null)
    .executeTakeFirst();
  if (newest?.max === null || newest?.max === undefined) return 0;
  const max = newest.max as string | number;
  let total = 0;
  for (;;) {
    const rows = await db
      .selectFrom('events')
      .select(['id', 'n'])
      .where('id', 'is not', null)
      .where('id', '<', max)
      .where('ts', '<', cutoff)
      .orderBy('id')
      .limit(BATCH)
      .execute();
    if (rows.length === 0) break;
    const ids = rows.map((r) => r.id as string | number);
    // The watermark first, then the delete: a crash between them makes the hub send a
    // reset for events still there, never skip deleted ones silently. A block row's last
    // id is its id + n - 1.
    const last = rows.reduce((m, r) => {
      const end = BigInt(r.id as string | number) + BigInt(r.n ?? 1) - 1n;
      return end > m ? end : m;
    }, 0n);
    const v = store.dialect === 'postgres' ? String(last) : Number(last);
    await db
      .updateTable('event_pruned')
      .set({ through: sql<string>`case when through < ${v} then ${v} else through end` })
      .execute();
    await db.deleteFrom('events').where('id', 'in', ids).execute();
    total += ids.length;
    if (ids.length < BATCH) break;
  }
  await db.deleteFrom('node_event_keys').where('created_at', '<', cutoff).execute();
  return total;
}

export function startPruner(deps: {
  store: Store;
  clock: Clock;
  log: Logger;
  retentionMs: number;
}): () => void {
  let timer: TimerHandle | null = null;
  let stopped = false;
  const run = async () => {
    try {
      const n = await pruneEvents(deps.store, deps.clock.now(), deps.retentionMs);
      if (n > 0) deps.log.info({ pruned: n }, 'pruned feed events past retention');
    } catch (e) {
      deps.log.warn({ err: e }, 'pruning feed events failed; retrying later');
    }
    if (!stopped) timer = deps.clock.setTimeout(() => void run(), PRUNE_EVERY_MS);
  };
  timer = deps.clock.setTimeout(() => void run(), 1000);
  return () => {
    stopped = true;
    timer?.cancel();
  };
}
