// PostgreSQL: lease-holding requests of one kind coalesced into shared statements (like the
// SQLite store's grouped commits): a request arriving while a statement is under way goes in
// the next one with the others waiting. Owns no SQL (leased.ts) and no decision on a row.
import { iso } from '../../../lib/clock.js';
import type { Principal } from '../../auth/principal.js';
import { EVENT_BLOCK_MAX } from '../../store/event-blocks.js';
import type { Write } from '../../store/tx.js';
import {
  type LeasedAck,
  type LeasedChange,
  type LeasedOutcome,
  type LeasedRow,
  leasedText,
} from './leased.js';

/** Most requests one statement carries (its events are one block: at most EVENT_BLOCK_MAX). */
export const MAX_BATCH = Math.min(500, EVENT_BLOCK_MAX);
/** Statements of one kind under way at once, by default (of the hot pool's connections). */
export const DEFAULT_IN_FLIGHT = 4;

const NO_CUR = { cur_state: null, cur_domain: null, cur_parent: null, cur_lease: null };

interface Pending<R> {
  taskId: string;
  leaseId: string;
  arg: string | null;
  domains: string | null;
  node: string | null;
  resolve(row: R | null): void;
  reject(e: unknown): void;
}

export class LeasedBatcher<R extends LeasedOutcome & { id: string | null } = LeasedRow> {
  private readonly queue: Pending<R>[] = [];
  private inFlight = 0;
  private scheduled = false;
  /** Tasks in a statement under way: a later request for one of them waits for it. */
  private readonly busyIds = new Set<string>();
  private readonly text: string;
  /** The statement for a lone request (scalar parameters, see leasedText). */
  private readonly single: string;

  constructor(
    private readonly write: Write,
    private readonly clock: { now(): number },
    private readonly change: LeasedChange,
    private readonly maxInFlight = DEFAULT_IN_FLIGHT,
  ) {
    this.text = leasedText(change);
    this.single = leasedText(change, true);
  }

  /**
   * Applies the change if `leaseId` is the task's current lease and its state is one of
   * `change.from`, appending the event; what it cannot decide alone it leaves alone (see
   * leasedText). Null: no such task.
   */
  run(p: Principal, taskId: string, leaseId: string, arg: string | null): Promise<R | null> {
    return new Promise((resolve, reject) => {
      this.queue.push({
        taskId,
        leaseId,
        arg,
        domains: p.domains === null ? null : JSON.stringify(p.domains),
        node: p.nodeId ?? null,
        resolve,
        reject,
      });
      this.schedule();
    });
  }

  /** `run` for several requests of one caller, with one promise for all (rows in request order). */
  runMany(
    p: Principal,
    reqs: readonly { taskId: string; leaseId: string; arg: string | null }[],
  ): Promise<(R | null)[]> {
    return new Promise((resolve, reject) => {
      const rows: (R | null)[] = new Array(reqs.length).fill(null);
      let left = reqs.length;
      if (left === 0) {
        resolve(rows);
        return;
      }
      let failed = false;
      const domains = p.domains === null ? null : JSON.stringify(p.domains);
      const node = p.nodeId ?? null;
      reqs.forEach((r, i) => {
        this.queue.push({
          taskId: r.taskId,
          leaseId: r.leaseId,
          arg: r.arg,
          domains,
          node,
          resolve: (row) => {
            rows[i] = row;
            if (--left === 0 && !failed) resolve(rows);
          },
          reject: (e) => {
            if (failed) return;
            failed = true;
            reject(e);
          },
        });
      });
      this.schedule();
    });
  }

  /**
   * Starts a drain after the current synchronous run of calls, so requests made together (the
   * items of one completion of many, several callers in one tick) go in one statement rather
   * than the first few alone.
   */
  private schedule(): void {
    if (this.scheduled) return;
    this.scheduled = true;
    queueMicrotask(() => {
      this.scheduled = false;
      if (this.queue.length > 0 && this.inFlight < this.maxInFlight) void this.drain();
    });
  }

  private async drain(): Promise<void> {
    this.inFlight++;
    try {
      while (this.queue.length > 0) {
        // One request per task in a statement: a second one for the same task waits for the
        // next, so it sees the first one's outcome (and gets stale_lease). One pass over the
        // queue, keeping the rest in place (no splice per request).
        const batch: Pending<R>[] = [];
        let kept = 0;
        for (const item of this.queue) {
          if (batch.length < MAX_BATCH && !this.busyIds.has(item.taskId)) {
            this.busyIds.add(item.taskId);
            batch.push(item);
          } else {
            this.queue[kept++] = item;
          }
        }
        this.queue.length = kept;
        if (batch.length === 0) break;
        try {
          await this.send(batch);
        } finally {
          for (const b of batch) this.busyIds.delete(b.taskId);
        }
      }
    } finally {
      // Requests left in the queue wait for a task in another statement: the drain that
      // sent it takes them when it is back (its loop runs until the queue is empty).
      this.inFlight--;
    }
  }

  private async send(batch: Pending<R>[]): Promise<void> {
    const nowMs = this.clock.now();
    let rows: R[];
    try {
      rows = await this.write.statement<R>(
        batch.length === 1
          ? {
              name: `${this.change.name}_1`,
              text: this.single,
              values: [
                batch[0]?.taskId,
                batch[0]?.leaseId,
                batch[0]?.arg,
                batch[0]?.domains,
                iso(nowMs),
                batch[0]?.node,
              ],
            }
          : {
              name: this.change.name,
              text: this.text,
              values: [
                batch.map((b) => b.taskId),
                batch.map((b) => b.leaseId),
                batch.map((b) => b.arg),
                batch.map((b) => b.domains),
                iso(nowMs),
                batch.map((b) => b.node),
              ],
            },
        // With `ack`, only the requests left alone come back: the rest changed.
        (rows) => (this.change.ack ? rows.length < batch.length : rows.some((r) => r.id !== null)),
      );
    } catch (e) {
      // A deadlock with another replica's batch (or any error) of a batch: each request alone,
      // so one request's failure is its own.
      if (batch.length > 1) {
        for (const b of batch) await this.send([b]);
        return;
      }
      for (const b of batch) b.reject(e);
      return;
    }
    const byOrd = new Map(rows.map((r) => [Number(r.ord), r]));
    const now = iso(nowMs);
    batch.forEach((b, i) => {
      const r = byOrd.get(i + 1);
      if (r === undefined && this.change.ack) {
        const ack: LeasedAck = { ord: String(i + 1), ...NO_CUR, id: b.taskId, updated_at: now };
        b.resolve(ack as unknown as R);
        return;
      }
      b.resolve(r && (r.id !== null || r.cur_state !== null) ? r : null);
    });
  }
}
