// The fan-out's local ring buffer and its resume decision (pure; no I/O). Every event a local
// consumer can see passes through here in the order consumers see it. Tower events keep the
// tower's id ("1234"); events svcd makes itself (matrix-down/-up, MQTT) get "<last tower id
// released>.<n>", so one id space orders both and a consumer resumes with whatever it saw last.

/** An event's position: the tower id, then the local sequence after that tower event (0 for the tower event itself). */
export interface EventKey {
  tower: bigint;
  local: number;
}

const ID_SHAPE = /^([0-9]{1,19})(?:\.([0-9]{1,9}))?$/;

/** "1234" → {1234, 0}; "1234.2" → {1234, 2}; anything else null. */
export function parseEventKey(id: string): EventKey | null {
  const m = ID_SHAPE.exec(id);
  if (!m) return null;
  return { tower: BigInt(m[1] as string), local: m[2] === undefined ? 0 : Number(m[2]) };
}

export function formatEventKey(k: EventKey): string {
  return k.local === 0 ? String(k.tower) : `${k.tower}.${k.local}`;
}

export function compareKeys(a: EventKey, b: EventKey): number {
  if (a.tower !== b.tower) return a.tower < b.tower ? -1 : 1;
  return a.local - b.local;
}

export interface RingEntry<T> {
  key: EventKey;
  id: string;
  value: T;
}

/** What a consumer resuming after `after` gets: the entries, and whether a gap precedes them. */
export interface ResumePlan<T> {
  /** Events to replay, oldest first. */
  entries: RingEntry<T>[];
  /** Set when events after `after` may be gone: send a `reset` first. */
  reset: { reason: 'buffer'; last_event_id: string; resume_after: string } | null;
}

/**
 * A bounded buffer of the newest events. Continuity is only promised where it is known: a
 * resume id still in the buffer, or one at or after the newest evicted event. Any other id
 * (too old, from before this svcd started, never issued) gets a reset — a gap is never silent.
 */
export class EventRing<T> {
  private readonly slots: (RingEntry<T> | undefined)[];
  private head = 0;
  private count = 0;
  /** The key of the newest evicted entry: everything after it is still here. */
  private floor: EventKey | null = null;

  constructor(readonly capacity: number) {
    if (!(capacity >= 1)) throw new Error('ring capacity must be at least 1');
    this.slots = new Array(capacity);
  }

  /**
   * Declares that nothing after `k` is missing (svcd resumed after k, its last relayed event,
   * before a restart). Only on an empty ring.
   */
  continueAfter(k: EventKey): void {
    if (this.count > 0) throw new Error('continueAfter() needs an empty ring');
    this.floor = k;
  }

  /** Forgets everything (the tower's ids started over): every resume id is then unknown. */
  clear(): void {
    this.slots.fill(undefined);
    this.head = 0;
    this.count = 0;
    this.floor = null;
  }

  get size(): number {
    return this.count;
  }

  /** Appends; keys must increase (the caller assigns them in order). */
  push(entry: RingEntry<T>): void {
    const last = this.newest()?.key ?? this.floor;
    if (last && compareKeys(entry.key, last) <= 0) {
      throw new Error(`ring keys must increase: ${entry.id} after ${formatEventKey(last)}`);
    }
    if (this.count === this.capacity) {
      const evicted = this.slots[this.head] as RingEntry<T>;
      this.floor = evicted.key;
      this.slots[this.head] = entry;
      this.head = (this.head + 1) % this.capacity;
    } else {
      this.slots[(this.head + this.count) % this.capacity] = entry;
      this.count++;
    }
  }

  oldest(): RingEntry<T> | undefined {
    return this.count === 0 ? undefined : this.slots[this.head];
  }

  /** The newest key here, or the one the ring continues after. */
  lastKey(): EventKey | undefined {
    return this.newest()?.key ?? this.floor ?? undefined;
  }

  newest(): RingEntry<T> | undefined {
    return this.count === 0 ? undefined : this.slots[(this.head + this.count - 1) % this.capacity];
  }

  private at(i: number): RingEntry<T> {
    return this.slots[(this.head + i) % this.capacity] as RingEntry<T>;
  }

  /** Index of the first entry with key > k (binary search: keys increase). */
  private firstAfter(k: EventKey): number {
    let lo = 0;
    let hi = this.count;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (compareKeys(this.at(mid).key, k) <= 0) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  }

  private contains(k: EventKey): boolean {
    const i = this.firstAfter(k) - 1;
    return i >= 0 && compareKeys(this.at(i).key, k) === 0;
  }

  /** Every entry, oldest first. */
  all(): RingEntry<T>[] {
    return Array.from({ length: this.count }, (_, i) => this.at(i));
  }

  /**
   * What a consumer gets when it (re)connects. `after` null = a new consumer: live events
   * only. An id that is unknown here gets a reset and the whole buffer.
   */
  resume(after: EventKey | null, afterId: string | null): ResumePlan<T> {
    if (after === null) return { entries: [], reset: null };
    const known = this.contains(after) || (this.floor !== null && compareKeys(after, this.floor) >= 0);
    if (known) {
      const from = this.firstAfter(after);
      return {
        entries: Array.from({ length: this.count - from }, (_, i) => this.at(from + i)),
        reset: null,
      };
    }
    const oldest = this.oldest();
    return {
      entries: this.all(),
      reset: {
        reason: 'buffer',
        last_event_id: afterId ?? formatEventKey(after),
        resume_after: this.floor ? formatEventKey(this.floor) : oldest ? previousId(oldest.key) : '0',
      },
    };
  }
}

/** The id just before k, for a reset's resume_after when nothing was evicted yet. */
function previousId(k: EventKey): string {
  if (k.local > 0) return formatEventKey({ tower: k.tower, local: k.local - 1 });
  return k.tower > 0n ? String(k.tower - 1n) : '0';
}
