// The feed hub: one reader of the event log per tower replica, fanning events out to every
// open stream (SSE or WebSocket) of this replica.
//
// The table is the source of truth; wake-ups only say "look again": local commits (the
// tower's eventsCommitted signal), other replicas' sequencer (PostgreSQL LISTEN) and a
// backstop poll, so a lost notification delays an event by at most the poll interval and
// never loses it.
// A subscriber that resumes is registered first, then replays from the table; live events that
// arrive meanwhile wait in its queue and are de-duplicated by id at the switch, so the client
// gets every later event exactly once, in order, with no gap between replay and live.
import { sql } from 'kysely';
import type { Clock, TimerHandle } from '../../lib/clock.js';
import type { Logger } from '../../lib/log.js';
import type { EventType, FeedEvent } from '../../protocol/events.js';
import type { Principal } from '../auth/principal.js';
import { type BlockCodec, EVENT_BLOCK_MAX } from '../store/event-blocks.js';
import type { Store } from '../store/open.js';
import type { PgListener } from '../store/pg-listen.js';
import { eventsFromRow, notifyChannel } from './event-log.js';

export const PAGE = 500;
/** Backstop for lost notifications (and for a LISTEN connection being re-established). */
const POLL_MS = 1000;
/** Live events a replaying subscriber may queue before it is cut off (it resumes by id). */
const MAX_QUEUED = 10_000;
/**
 * Spacing of reads of the log (real time, like the sequencer's busy gap). A lone event is
 * read at once; under a stream of commits, reads are spaced so each page carries several
 * events and every stream gets one write per page instead of one per commit: with thousands
 * of streams the per-write cost, not the bytes, is what limits fan-out. The gap is at least
 * MIN and 1.5 times the CPU time the last pass cost (read, fan-out and the streams' writes),
 * counted from the start of that pass, so fan-out takes at most two thirds of a core (twice
 * the pass cost, half a core, made p99 at 1 000 streams x 200 events/s worse: 77 against
 * 43 ms, docs/perf-notes.md "feed") until a pass costs more than MAX: past some thousands of
 * streams, passes follow each other, written in slices (FANOUT_SLICE). CPU time,
 * not wall time: a pass that waited for the CPU (other processes, a busy machine) cost no
 * more, and spacing reads further would only add that wait to every event's latency again.
 * MAX bounds the latency this adds when fan-out alone is that expensive.
 */
export const READ_GAP = { MIN_MS: 10, MAX_MS: 100, PASS_FACTOR: 1.5 };

/**
 * Streams handed a pass's events in one turn of the event loop; the hub yields
 * (setImmediate) between slices, so requests and timers run while a pass to thousands of
 * streams is written (at 10 000 streams one unsliced pass held the loop for hundreds of ms,
 * and a request that needs several turns waited that long for each: POST /approvals took
 * 0.6–21 s). A slice costs about 15 µs per stream (mostly the socket write), so a few ms.
 */
export const FANOUT_SLICE = 256;

export function readGapMs(lastPassCpuMs: number): number {
  return Math.min(READ_GAP.MAX_MS, Math.max(READ_GAP.MIN_MS, lastPassCpuMs * READ_GAP.PASS_FACTOR));
}

/**
 * What decides which events a subscriber sees: the domains its principal may see and its
 * filter. Subscribers with equal keys see exactly the same events.
 */
export function viewKey(principal: Principal, filter: FeedFilter): string {
  const sorted = (xs: readonly string[] | null | undefined) => (xs ? [...xs].sort() : null);
  return JSON.stringify([
    sorted(principal.domains),
    sorted(filter.domainIds?.length ? filter.domainIds : null),
    sorted(filter.missionIds?.length ? filter.missionIds : null),
    sorted(filter.types?.length ? filter.types : null),
  ]);
}

export interface FeedFilter {
  domainIds?: string[];
  missionIds?: string[];
  types?: EventType[];
}

export interface ResetInfo {
  reason: 'retention' | 'unknown';
  /** The id the client asked to resume after. */
  last_event_id: string;
  /** Events after this id follow. */
  resume_after: string;
}

export interface SubscriberSink {
  /**
   * Events in id order, already filtered for this subscriber. Live fan-out hands every
   * subscriber with the same view (visible domains and filter) the same array object, so a
   * sink may cache what it makes of it (feed/frames.ts). Returns false when the consumer's
   * buffer is over its limit: the hub then closes it.
   */
  deliver(events: readonly FeedEvent[]): boolean;
  /**
   * Replay is paced by the consumer: when this says the buffer is past its soft limit, the
   * hub waits for `drained()` before sending more (live delivery is not paced: a consumer that
   * falls behind live is cut off at the hard limit and resumes by id).
   */
  busy?(): boolean;
  drained?(): Promise<void>;
  reset(info: ResetInfo): void;
  /** Called once when the hub ends the subscription (overflow, shutdown, replay error). */
  closed(reason: 'overflow' | 'shutdown' | 'error'): void;
}

export interface Subscription {
  close(): void;
}

interface Sub {
  principal: Principal;
  filter: FeedFilter;
  /** Subscribers with the same key see the same events (see viewKey). */
  view: string;
  sink: SubscriberSink;
  /** Highest id handed to the sink (or skipped as invisible). */
  lastSent: bigint;
  replaying: boolean;
  queued: FeedEvent[];
  open: boolean;
}

export interface FeedHubDeps {
  store: Store;
  clock: Clock;
  log: Logger;
  /** Fires when this replica's writes became readable. */
  onLocalCommit(listener: () => void): () => void;
  /** PostgreSQL: the replica's LISTEN connection (other replicas' sequencers notify on it). */
  listener?: PgListener | null;
  /** The areas' compact block forms (store/event-blocks.ts), to read blocks with. */
  blocks: readonly BlockCodec[];
  /** Streams per turn of the event loop in a fan-out pass (FANOUT_SLICE; tests set less). */
  slice?: number;
}

export class FeedHub {
  private readonly subs = new Set<Sub>();
  /** Highest event id this hub has read from the table. */
  private head = 0n;
  private running: Promise<void> | null = null;
  private again = false;
  private lastReadAt = 0;
  private lastPassCpuMs = 0;
  private read = 0;
  private passes = 0;
  private writes = 0;
  private stopped = false;
  private readFailing = false;
  private poll: TimerHandle | null = null;
  private unsubscribeLocal: (() => void) | null = null;
  private readonly log: Logger;

  constructor(private readonly deps: FeedHubDeps) {
    this.log = deps.log.child({ component: 'feed' });
    // A wake-up per notification, and a look after every reconnection for what was missed.
    deps.listener?.subscribe(notifyChannel(deps.store.schema), () => this.wake());
    deps.listener?.onListening(() => this.wake());
  }

  get subscriberCount(): number {
    return this.subs.size;
  }

  /** Events read from the table for live delivery since start (none while nobody subscribes). */
  get eventsRead(): number {
    return this.read;
  }

  /**
   * Live fan-out since start: pages handed out (one per pass, more when a pass reads several)
   * and the hand-overs to streams (each a write on its socket). With thousands of streams the
   * writes, not the events, are what fan-out costs.
   */
  get fanOut(): { pages: number; writes: number } {
    return { pages: this.passes, writes: this.writes };
  }

  async start(): Promise<void> {
    this.head = await this.maxId();
    this.unsubscribeLocal = this.deps.onLocalCommit(() => this.wake());
    const tick = () => {
      this.poll = this.deps.clock.setTimeout(() => {
        this.wake();
        if (!this.stopped) tick();
      }, POLL_MS);
    };
    tick();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.poll?.cancel();
    this.unsubscribeLocal?.();
    for (const s of [...this.subs]) this.end(s, 'shutdown');
    await this.running;
  }

  /** Asks the hub to read new events now (coalesced). */
  wake(): void {
    if (this.stopped) return;
    if (this.running) {
      this.again = true;
      return;
    }
    this.running = (async () => {
      try {
        do {
          this.again = false;
          const wait = this.lastReadAt + readGapMs(this.lastPassCpuMs) - performance.now();
          if (wait > 0) await new Promise((r) => setTimeout(r, wait));
          this.lastReadAt = performance.now();
          const cpu = process.cpuUsage();
          const delivered = await this.readNew();
          if (delivered > 0) {
            // Streams write what the last slice gave them on the next tick: count that in
            // (and whatever ran between slices: a busier replica reads a little less often).
            await new Promise((r) => setImmediate(r));
            const used = process.cpuUsage(cpu);
            // The process's CPU time (other threads too, and whatever ran in between), never
            // more than the pass took in real time.
            const wall = performance.now() - this.lastReadAt;
            this.lastPassCpuMs = Math.min(wall, (used.user + used.system) / 1000);
          } else {
            this.lastPassCpuMs = 0;
          }
        } while (this.again && !this.stopped);
        if (this.readFailing) {
          this.readFailing = false;
          this.log.info('reading new events works again');
        }
      } catch (e) {
        // Once per outage, not once per poll.
        if (!this.stopped && !this.readFailing) {
          this.readFailing = true;
          this.log.warn({ err: e }, 'reading new events failed; retrying on every wake-up');
        }
      } finally {
        this.running = null;
      }
    })();
  }

  /**
   * Opens a subscription. `afterId` null: live events from now on. Otherwise every visible
   * event with a larger id, then live; a `reset` first when events after `afterId` were
   * pruned (retention) or `afterId` was never issued (unknown).
   */
  async subscribe(principal: Principal, filter: FeedFilter, afterId: bigint | null, sink: SubscriberSink) {
    // With nobody subscribed the head only follows the newest id (readNew): catch up first,
    // so "from now on" means now. A store that cannot say ends the stream at once (the
    // client reconnects), rather than leaving it open and silent.
    if (afterId === null && this.subs.size === 0) {
      try {
        await this.skipToNewest();
      } catch (e) {
        this.log.warn({ err: e }, 'cannot open a feed subscription: the store did not answer');
        sink.closed('error');
        return { close: () => {} };
      }
    }
    const sub: Sub = {
      principal,
      filter,
      view: viewKey(principal, filter),
      sink,
      lastSent: this.head,
      replaying: afterId !== null,
      queued: [],
      open: true,
    };
    this.subs.add(sub);
    const subscription: Subscription = { close: () => this.remove(sub) };
    if (afterId === null) return subscription;
    try {
      let cursor = afterId;
      const { min, max, pruned } = await this.bounds();
      // biome-ignore lint/complexity/useMathMinMax: bigint (Math.max takes numbers)
      const newest = max > this.head ? max : this.head;
      if (afterId > newest) {
        sink.reset({ reason: 'unknown', last_event_id: String(afterId), resume_after: String(newest) });
        cursor = newest;
      } else if (afterId < pruned) {
        // Events after afterId, up to `pruned`, may have been deleted (exact: ids are not
        // dense, so the oldest id kept cannot tell).
        sink.reset({ reason: 'retention', last_event_id: String(afterId), resume_after: String(pruned) });
        cursor = pruned;
      } else if (min === null && afterId < newest) {
        // Everything up to the newest id is gone (only possible if the log was emptied by hand).
        sink.reset({ reason: 'retention', last_event_id: String(afterId), resume_after: String(newest) });
        cursor = newest;
      }
      sub.lastSent = cursor;
      for (;;) {
        const page = await this.page(cursor, PAGE);
        if (!(await this.replay(sub, page))) return subscription;
        if (page.length < PAGE) break;
        cursor = BigInt(page[page.length - 1]?.id ?? cursor);
      }
      // Switch to live: what queued meanwhile, minus what the replay already sent. New live
      // events keep queueing until the queue is empty, so order holds.
      while (sub.open && sub.queued.length > 0) {
        const queued = sub.queued;
        sub.queued = [];
        if (!(await this.replay(sub, queued))) break;
      }
      sub.replaying = false;
    } catch (e) {
      this.log.warn({ err: e }, 'feed replay failed');
      this.end(sub, 'error');
    }
    return subscription;
  }

  /** Whether `principal` may see `ev` and `filter` selects it. */
  static matches(principal: Principal, filter: FeedFilter, ev: FeedEvent): boolean {
    if (ev.domain_id === null) {
      // Node- and tower-level events carry no domain: only principals of every domain see them.
      if (principal.domains !== null) return false;
    } else if (principal.domains !== null && !principal.domains.includes(ev.domain_id)) {
      return false;
    }
    if (filter.domainIds?.length && (ev.domain_id === null || !filter.domainIds.includes(ev.domain_id))) {
      return false;
    }
    if (filter.missionIds?.length && (ev.mission_id === null || !filter.missionIds.includes(ev.mission_id))) {
      return false;
    }
    if (filter.types?.length && !filter.types.includes(ev.type)) return false;
    return true;
  }

  /**
   * Sends `sub` the events of `events` (id order) after its last sent id that it may see.
   * Returns false when the subscriber was cut off.
   */
  private sendMany(sub: Sub, events: readonly FeedEvent[], live = false): boolean {
    const visible: FeedEvent[] = [];
    for (const ev of events) {
      const id = BigInt(ev.id);
      if (id <= sub.lastSent) continue;
      sub.lastSent = id;
      if (FeedHub.matches(sub.principal, sub.filter, ev)) visible.push(ev);
    }
    return this.handOver(sub, visible, live);
  }

  /**
   * Replay is paced by the consumer, one event at a time: a stream holds at most its soft
   * limit plus one event unsent. Returns false once the subscriber is gone.
   */
  private async replay(sub: Sub, events: readonly FeedEvent[]): Promise<boolean> {
    for (const ev of events) {
      if (!sub.open || !this.sendMany(sub, [ev])) return false;
      if (sub.sink.busy?.()) await sub.sink.drained?.();
    }
    return sub.open;
  }

  /** `live`: a hand-over of live fan-out, counted in fanOut.writes. */
  private handOver(sub: Sub, events: readonly FeedEvent[], live = false): boolean {
    if (events.length === 0) return true;
    if (live) this.writes++;
    if (sub.sink.deliver(events)) return true;
    this.end(sub, 'overflow');
    return false;
  }

  /** Reads and fans out every event after the head; returns how many there were. */
  private async readNew(): Promise<number> {
    if (this.subs.size === 0) {
      // Nobody to deliver to: move the head past the new events without reading them.
      await this.skipToNewest();
      return 0;
    }
    let n = 0;
    for (;;) {
      const page = await this.page(this.head, PAGE);
      n += page.length;
      this.read += page.length;
      if (page.length === 0) return n;
      const first = BigInt(page[0]?.id ?? 0);
      const last = BigInt(page[page.length - 1]?.id ?? 0);
      this.head = last;
      this.passes++;
      // What each view sees of this page, worked out once per view: every subscriber of a
      // view gets the same array, so its frames are made once (feed/frames.ts).
      const views = new Map<string, FeedEvent[]>();
      // The streams open now, in slices with a turn of the event loop between them. The next
      // page is read only once every one of them has this one, so each gets pages in order;
      // one that closes meanwhile is skipped, one that opens meanwhile starts after `last`
      // (live) or reads this page from the table (resume).
      const subs = [...this.subs];
      const slice = Math.max(1, this.deps.slice ?? FANOUT_SLICE);
      for (let i = 0; i < subs.length; i++) {
        if (i > 0 && i % slice === 0) await new Promise((r) => setImmediate(r));
        const sub = subs[i] as Sub;
        if (!sub.open) continue;
        if (sub.replaying) {
          if (sub.queued.length + page.length > MAX_QUEUED) this.end(sub, 'overflow');
          else for (const ev of page) sub.queued.push(ev);
          continue;
        }
        if (sub.lastSent >= first) {
          // It switched from replay to live having read some of this page from the table.
          this.sendMany(sub, page, true);
          continue;
        }
        sub.lastSent = last;
        let visible = views.get(sub.view);
        if (!visible) {
          visible = page.filter((ev) => FeedHub.matches(sub.principal, sub.filter, ev));
          views.set(sub.view, visible);
        }
        this.handOver(sub, visible, true);
      }
      if (page.length < PAGE) return n;
      // Let the streams write this page before the next one is read: what one stream holds
      // unsent grows by at most a page per pass (the backpressure bound on /metrics).
      await new Promise((r) => setImmediate(r));
    }
  }

  /**
   * Up to `limit` events with ids above `after`, in id order. On PostgreSQL a row may be a
   * block of events (ids `id` .. `id + n - 1`, at most EVENT_BLOCK_MAX, and the next row's id
   * past them): rows from `after - EVENT_BLOCK_MAX + 1` on are read (the primary key's
   * range), those ending at or below `after` left out, so every row read gives at least one
   * event and `limit` rows are enough. SQLite has no blocks (its ids are dense): from `after`.
   */
  private async page(after: bigint, limit: number): Promise<FeedEvent[]> {
    const span = this.deps.store.dialect === 'postgres' ? BigInt(EVENT_BLOCK_MAX - 1) : 0n;
    const rows = await this.deps.store.reader
      .selectFrom('feed_events')
      .select(['id', 'ts', 'type', 'domain_id', 'mission_id', 'agent_id', 'status', 'n', 'payload'])
      .where('id', '>', this.idParam(after - span))
      .where(sql<string | number>`id + coalesce(n, 1)`, '>', this.idParam(after + 1n))
      .orderBy('id')
      .limit(limit)
      .execute();
    const events: FeedEvent[] = [];
    for (const row of rows) {
      for (const ev of eventsFromRow(row, this.deps.blocks)) {
        if (BigInt(ev.id) <= after) continue;
        if (events.length === limit) return events;
        events.push(ev);
      }
    }
    return events;
  }

  /**
   * The oldest and the newest event id kept (a block's last id is its newest), and the
   * highest id pruning deleted (feed/retention.ts).
   */
  private async bounds(): Promise<{ min: bigint | null; max: bigint; pruned: bigint }> {
    const r = await this.deps.store.reader
      .selectNoFrom((eb) => [
        eb.selectFrom('event_pruned').select('through').limit(1).as('pruned'),
        eb.selectFrom('feed_events').select('id').orderBy('id').limit(1).as('min'),
        eb
          .selectFrom('feed_events')
          .select(sql<string | number>`id + coalesce(n, 1) - 1`.as('last'))
          .orderBy('id', 'desc')
          .limit(1)
          .as('max'),
      ])
      .executeTakeFirst();
    return {
      min: r?.min === null || r?.min === undefined ? null : BigInt(r.min as string | number),
      max: r?.max === null || r?.max === undefined ? 0n : BigInt(r.max as string | number),
      pruned: r?.pruned === null || r?.pruned === undefined ? 0n : BigInt(r.pruned as string | number),
    };
  }

  private async skipToNewest(): Promise<void> {
    const max = await this.maxId();
    if (max > this.head) this.head = max;
  }

  private async maxId(): Promise<bigint> {
    return (await this.bounds()).max;
  }

  /** SQLite compares integers, PostgreSQL bigint accepts the decimal string. */
  private idParam(id: bigint): string | number {
    return this.deps.store.dialect === 'sqlite' ? Number(id) : String(id);
  }

  private remove(sub: Sub): void {
    sub.open = false;
    sub.queued = [];
    this.subs.delete(sub);
  }

  private end(sub: Sub, reason: 'overflow' | 'shutdown' | 'error'): void {
    if (!sub.open) return;
    this.remove(sub);
    try {
      sub.sink.closed(reason);
    } catch (e) {
      this.log.warn({ err: e }, 'closing a feed subscriber failed');
    }
  }
}
