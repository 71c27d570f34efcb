// The due-jobs property again, on the real component: FakeClock ticks, state.db dedup keys,
// restarts that are graceful or kill -9 (crash: nothing stopped, the next "process" opens
// the same state.db). Fewer and shorter timelines (90 minutes, so no job outgrows its 100
// history entries) than due-jobs.test.ts, because every tick here is a real SQLite
// transaction; the week-long run is the pure one.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { MIN, startCron, writeCronToml } from '../../../test/support/cron.js';
import { expectedFires, jobArb, jobsOf, uptimeArb } from '../../../test/support/cron-oracle.js';
import { FakeClock } from '../../lib/clock.js';
import { daemonPaths } from '../paths.js';
import { openStateStore } from '../state/store.js';
import { type CronDb, history } from './store.js';

// state.db commits are fsynced (synchronous = FULL); on tmpfs that costs nothing.
const scratch = (() => {
  try {
    return mkdtempSync('/dev/shm/svc-cron-prop-');
  } catch {
    return mkdtempSync(join(tmpdir(), 'svc-cron-prop-'));
  }
})();

describe('cron component property', () => {
  it('fires each scheduled minute while up exactly once, across graceful and kill -9 restarts', async () => {
    let run = 0;
    try {
      await fc.assert(
        fc.asyncProperty(
          fc.array(jobArb, { minLength: 1, maxLength: 3 }),
          uptimeArb(90 * MIN, 8),
          async (arbs, ups) => {
            const home = join(scratch, `run-${run++}`);
            const text = jobsOf(arbs)
              .map(
                (j) =>
                  `[[job]]\nname = "${j.name}"\n${j.cron ? `schedule = "${j.cron}"` : `kind = "heartbeat"\ninterval = "${j.every}"`}\nsession = "s"\nprompt = "p"\ncatch_up = "${j.catchUp}"\n`,
              )
              .join('\n');
            writeCronToml(home, `timezone = "UTC"\n${text}`);
            const fired: string[] = [];
            for (const up of ups) {
              const h = await startCron({
                home,
                now: up.start,
                signal: async (target) => {
                  fired.push(target);
                },
              });
              await h.clock.set(up.stop);
              if (up.crash) await h.crash();
              else await h.stop();
            }
            // Which fires happened is in history (every fire has its row before dispatch); the
            // signal calls count them independently of it.
            const db = openStateStore(daemonPaths(home).stateDb, new FakeClock(0));
            const rows: string[] = [];
            for (const j of jobsOf(arbs)) {
              const items = await history(db.db as unknown as CronDb, j.name, 100);
              for (const f of items)
                if (f.outcome !== 'skipped') rows.push(`${j.name}@${f.scheduled_minute}`);
            }
            await db.close();
            const expected = expectedFires(arbs, ups);
            expect(rows.sort()).toEqual(expected);
            expect(fired.length).toBe(expected.length);
          },
        ),
        { numRuns: 10 },
      );
    } finally {
      rmSync(scratch, { recursive: true, force: true });
    }
  });
});
