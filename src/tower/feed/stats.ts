// What the feed's streams hold in memory, as Prometheus metrics: bytes written to streams but
// not yet taken by the socket (per stream and in total), the largest such backlog any stream
// reached, consumers cut off for not reading, and replays that waited for their consumer;
// and the live fan-out's pages and the writes they took.
// These make "a stalled consumer costs bounded memory" observable without timing.
import { Counter, Gauge, type Registry } from 'prom-client';

export type Transport = 'sse' | 'ws';

export class FeedStats {
  /** Largest unsent backlog (bytes) one stream has held since the tower started. */
  private unsentMax = 0;
  private readonly streams = new Set<() => number>();
  private readonly cutOff = { sse: 0, ws: 0 };
  private readonly replayWaits = { sse: 0, ws: 0 };
  private fanOut: () => { pages: number; writes: number } = () => ({ pages: 0, writes: 0 });

  /** Where the live fan-out's counts come from (the replica's feed hub). */
  countFanOut(source: () => { pages: number; writes: number }): void {
    this.fanOut = source;
  }

  /** Watches an open stream; `unsent` reports its current backlog. Returns the unwatch. */
  track(unsent: () => number): () => void {
    this.streams.add(unsent);
    return () => {
      this.streams.delete(unsent);
    };
  }

  /** Records a stream's backlog at a moment it may peak (after a write). */
  observe(unsentBytes: number): void {
    if (unsentBytes > this.unsentMax) this.unsentMax = unsentBytes;
  }

  streamCutOff(t: Transport): void {
    this.cutOff[t]++;
  }

  replayWaited(t: Transport): void {
    this.replayWaits[t]++;
  }

  snapshot(): {
    streams: number;
    unsentBytes: number;
    unsentMaxBytes: number;
    cutOff: Record<Transport, number>;
    replayWaits: Record<Transport, number>;
  } {
    let unsent = 0;
    for (const f of this.streams) unsent += f();
    return {
      streams: this.streams.size,
      unsentBytes: unsent,
      unsentMaxBytes: this.unsentMax,
      cutOff: { ...this.cutOff },
      replayWaits: { ...this.replayWaits },
    };
  }

  register(registry: Registry): void {
    const stats = this;
    new Gauge({
      name: 'svc_feed_streams',
      help: 'Open feed streams (SSE and WebSocket) on this replica',
      registers: [registry],
      collect() {
        this.set(stats.streams.size);
      },
    });
    new Gauge({
      name: 'svc_feed_unsent_bytes',
      help: 'Bytes written to open feed streams that their sockets have not taken yet (all streams)',
      registers: [registry],
      collect() {
        this.set(stats.snapshot().unsentBytes);
      },
    });
    new Gauge({
      name: 'svc_feed_stream_unsent_bytes_max',
      help: 'Largest unsent backlog one feed stream has held since start (bounded by the cut-off limit plus one pass)',
      registers: [registry],
      collect() {
        this.set(stats.unsentMax);
      },
    });
    new Counter({
      name: 'svc_feed_streams_cut_off_total',
      help: 'Feed streams closed because their consumer stopped reading (it resumes by id)',
      labelNames: ['transport'],
      registers: [registry],
      collect() {
        this.reset();
        this.inc({ transport: 'sse' }, stats.cutOff.sse);
        this.inc({ transport: 'ws' }, stats.cutOff.ws);
      },
    });
    new Counter({
      name: 'svc_feed_replay_waits_total',
      help: 'Times a replaying feed stream waited for its consumer to read before sending more',
      labelNames: ['transport'],
      registers: [registry],
      collect() {
        this.reset();
        this.inc({ transport: 'sse' }, stats.replayWaits.sse);
        this.inc({ transport: 'ws' }, stats.replayWaits.ws);
      },
    });
    new Counter({
      name: 'svc_feed_fanout_pages_total',
      help: 'Pages of new events this replica read and handed to its open feed streams',
      registers: [registry],
      collect() {
        this.reset();
        this.inc(stats.fanOut().pages);
      },
    });
    new Counter({
      name: 'svc_feed_fanout_writes_total',
      help: 'Pages handed to one feed stream each (one socket write each): what fan-out costs with many streams',
      registers: [registry],
      collect() {
        this.reset();
        this.inc(stats.fanOut().writes);
      },
    });
  }
}
