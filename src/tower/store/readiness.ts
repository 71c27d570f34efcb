// Whether this replica can serve: the store answers a read, and, while the last write failed
// for lack of space, a read-only file system, a lock or an I/O error (store/health.ts), a probe
// write succeeds. Answers within its budget whatever the store does, and says why not.
// Probes of concurrent callers are shared, so a hung store holds one connection, not one per
// caller.
import type { Clock } from '../../lib/clock.js';
import { iso } from '../../lib/clock.js';
import { FAULT_ANSWER, storeFault } from './faults.js';
import type { StoreHealth } from './health.js';
import type { Store } from './open.js';
import type { Write } from './tx.js';

export type Readiness = { ready: true } | { ready: false; reason: string };

/** /readyz answers within 2 s (docs/operations.md): the probe gets this much of it. */
export const READY_BUDGET_MS = 1500;

export function createReadiness(deps: {
  store: Store;
  health: StoreHealth;
  write: Write;
  clock: Clock;
  budgetMs?: number;
}): () => Promise<Readiness> {
  const { store, health, write, clock } = deps;
  const budget = deps.budgetMs ?? READY_BUDGET_MS;
  let inFlight: Promise<Readiness> | null = null;

  async function probe(): Promise<Readiness> {
    const fault = health.writeFault();
    try {
      if (fault) {
        // The write path itself: it clears the fault when it commits.
        await write((tx) =>
          tx.db
            .insertInto('store_probe')
            .values({ id: 1, at: iso(tx.nowMs) })
            .onConflict((oc) => oc.column('id').doUpdateSet({ at: iso(tx.nowMs) }))
            .execute(),
        );
      } else {
        await store.reader.selectFrom('svc_migrations').select('version').limit(1).execute();
      }
      return { ready: true };
    } catch (e) {
      const f = storeFault(e) ?? fault;
      const why = f
        ? `${FAULT_ANSWER[f.kind].what} (${f.cause})`
        : `the store failed: ${(e as Error).message}`;
      const since = fault ? `; writes failing since ${fault.since}` : '';
      return { ready: false, reason: `${why}${since}` };
    }
  }

  return () => {
    inFlight ??= probe().finally(() => {
      inFlight = null;
    });
    const shared = inFlight;
    return new Promise<Readiness>((resolve) => {
      const timer = clock.setTimeout(() => {
        const fault = health.writeFault();
        resolve({
          ready: false,
          reason: `the store did not answer within ${budget} ms${fault ? `; writes failing since ${fault.since} (${fault.cause})` : ''}`,
        });
      }, budget);
      void shared.then((r) => {
        timer.cancel();
        resolve(r);
      });
    });
  };
}
