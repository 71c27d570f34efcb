// The bytes of feed events on the wire, shared by every stream of a fan-out pass. Fan-out to
// thousands of streams costs per stream, not per byte: so each event is serialized once, each
// principal's rate_limit block is computed once per millisecond, and streams that receive the
// same events in a pass (the hub hands every stream of a view the same array) write the very
// same Buffer, HTTP chunk framing included (no per-stream concatenation, encoding or
// garbage). It never decides who gets what (feed/hub.ts does).
import type { FeedEvent } from '../../protocol/events.js';
import type { Principal } from '../auth/principal.js';

export class FrameCache {
  private blocks = new Map<string, string | null>();
  private blocksAt = Number.NaN;
  private readonly json = new WeakMap<FeedEvent, string>();
  private readonly sse = new WeakMap<FeedEvent, Map<string, string>>();
  private readonly ws = new WeakMap<FeedEvent, Map<string, Buffer>>();
  private readonly batches = new WeakMap<
    readonly FeedEvent[],
    { raw: Map<string, Buffer>; chunked: Map<string, Buffer> }
  >();

  constructor(
    private readonly deps: {
      now(): number;
      /** The principal's rate_limit block as JSON, or null when limits are off. */
      blockOf(principal: Principal): string | null;
    },
  ) {}

  /** The principal's rate_limit block, computed at most once per millisecond. */
  block(principal: Principal): string | null {
    const now = this.deps.now();
    if (now !== this.blocksAt) {
      this.blocks.clear();
      this.blocksAt = now;
    }
    let b = this.blocks.get(principal.id);
    if (b === undefined) {
      b = this.deps.blockOf(principal);
      this.blocks.set(principal.id, b);
    }
    return b;
  }

  /** The event as JSON with `block` spliced in as its rate_limit field. */
  eventJson(ev: FeedEvent, block: string | null): string {
    let json = this.json.get(ev);
    if (json === undefined) {
      json = JSON.stringify(ev);
      this.json.set(ev, json);
    }
    return block ? `${json.slice(0, -1)},"rate_limit":${block}}` : json;
  }

  /** One SSE message (`id:` and `data:` lines); the same string for every stream with `block`. */
  sseFrame(ev: FeedEvent, block: string | null): string {
    let byBlock = this.sse.get(ev);
    if (!byBlock) {
      byBlock = new Map();
      this.sse.set(ev, byBlock);
    }
    const key = block ?? '';
    let frame = byBlock.get(key);
    if (frame === undefined) {
      frame = `id: ${ev.id}\ndata: ${this.eventJson(ev, block)}\n\n`;
      byBlock.set(key, frame);
    }
    return frame;
  }

  /** One WebSocket text message as bytes; the same Buffer for every stream with `block`. */
  wsFrame(ev: FeedEvent, block: string | null): Buffer {
    let byBlock = this.ws.get(ev);
    if (!byBlock) {
      byBlock = new Map();
      this.ws.set(ev, byBlock);
    }
    const key = block ?? '';
    let frame = byBlock.get(key);
    if (frame === undefined) {
      frame = Buffer.from(this.eventJson(ev, block), 'utf8');
      byBlock.set(key, frame);
    }
    return frame;
  }

  /**
   * The SSE messages of `events` as bytes, as one HTTP/1.1 chunk (size line and CRLF
   * around them) when `chunked`; the same Buffer for every stream handed the same array
   * with the same `block`.
   */
  sseBytes(events: readonly FeedEvent[], block: string | null, chunked: boolean): Buffer {
    let made = this.batches.get(events);
    if (!made) {
      made = { raw: new Map(), chunked: new Map() };
      this.batches.set(events, made);
    }
    // Keyed by the block string itself: within a millisecond every stream of a principal
    // passes the same string, whose hash V8 keeps (no key built per stream).
    const key = block ?? '';
    const byBlock = chunked ? made.chunked : made.raw;
    let bytes = byBlock.get(key);
    if (bytes === undefined) {
      if (chunked) bytes = httpChunk(this.sseBytes(events, block, false));
      else {
        let text = '';
        for (const ev of events) text += this.sseFrame(ev, block);
        bytes = Buffer.from(text, 'utf8');
      }
      byBlock.set(key, bytes);
    }
    return bytes;
  }
}

const CRLF = Buffer.from('\r\n');

/** `body` as one chunk of an HTTP/1.1 chunked body. */
export function httpChunk(body: Buffer): Buffer {
  return Buffer.concat([Buffer.from(`${body.length.toString(16)}\r\n`, 'latin1'), body, CRLF]);
}
