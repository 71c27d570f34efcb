// Finished fires: outcomes written to state.db in batches (fires that finish together share a
// transaction), job histories trimmed now and then, cron.fire events published. A failed
// write or publish is logged, never failing a fire or the tick.
import type { Logger } from '../../lib/log.js';
import type { CronFireEventPayload } from '../../protocol/cron.js';
import type { EventOutbox } from '../tower-client/outbox.js';
import * as store from './store.js';

/** A job's history is trimmed at its first entry after start, then every TRIM_EVERY. */
const TRIM_EVERY = 10;

export class CronOutcomes {
  private finished: { job: string; finish: store.Finish; event: CronFireEventPayload }[] = [];
  private flushing: Promise<void> | null = null;
  /** Fires per job since its history was last trimmed to the newest 100. */
  private readonly sinceTrim = new Map<string, number>();

  constructor(private readonly deps: { db: store.CronDb; events: EventOutbox; log: Logger }) {}

  /** Queues an outcome; resolves once it (and those queued with it) is written and published. */
  record(job: string, finish: store.Finish, event: CronFireEventPayload): Promise<void> {
    this.finished.push({ job, finish, event });
    this.flushing ??= (async () => {
      while (this.finished.length > 0) {
        const batch = this.finished;
        this.finished = [];
        const trimJobs = batch.filter((b) => this.trimDue(b.job)).map((b) => b.job);
        try {
          await store.finish(this.deps.db, batch, trimJobs);
        } catch (e) {
          this.deps.log.error({ err: e, fires: batch.length }, 'could not record cron outcomes');
        }
        for (const b of batch) await this.publish(b.event);
      }
      this.flushing = null;
    })();
    return this.flushing;
  }

  /** Resolves when every outcome queued so far is written and published. */
  async flushed(): Promise<void> {
    await this.flushing;
  }

  get busy(): boolean {
    return this.flushing !== null;
  }

  /**
   * Whether a job's history should be cut back to the newest 100 now: at its first entry
   * after start, then every TRIM_EVERY entries. Reads use LIMIT 100, so the few extra rows in
   * between never show, and a tick of 1 000 fires does not pay 1 000 deletes.
   */
  trimDue(job: string): boolean {
    const n = this.sinceTrim.get(job);
    if (n === undefined || n + 1 >= TRIM_EVERY) {
      this.sinceTrim.set(job, 0);
      return true;
    }
    this.sinceTrim.set(job, n + 1);
    return false;
  }

  async publish(payload: CronFireEventPayload): Promise<void> {
    try {
      await this.deps.events.publish({ type: 'matrix', payload: { ...payload } });
    } catch (e) {
      this.deps.log.warn({ err: e, job: payload.job }, 'could not publish the cron event');
    }
  }
}
