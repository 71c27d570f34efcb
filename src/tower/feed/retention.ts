// Background pruning of the event log (default retention 7 days) and of the idempotency keys
// of node-published events. The newest event is never deleted, so ids never go backwards
// (SQLite would otherwise reuse them) and a resume from before the oldest kept event is
// recognised and answered with a `reset` (feed/hub.ts).
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
    const ids = (
      await db
        .selectFrom('events')
        .select('id')
        .where('id', 'is not', null)
        .where('id', '<', max)
        .where('ts', '<', cutoff)
        .orderBy('id')
        .limit(BATCH)
        .execute()
    ).map((r) => r.id as string | number);
    if (ids.length === 0) break;
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
