// The counting readers of bench/feed must count what their own reads delivered, exactly: the
// read buffer is shared by every counting socket, so bytes past a read's end are stale bytes
// of another socket (full of events) and must never be counted.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { sseCounter, wsFrames } from './counters.mjs';

/** An SSE response body as the tower sends it: `retry:`, then events in HTTP chunks. */
function sseBody(events, perChunk, withResetAndComments) {
  const parts = ['retry: 1000\n\n'];
  if (withResetAndComments)
    parts.push('event: reset\ndata: {"reason":"retention","last_event_id":"1","resume_after":"2"}\n\n');
  for (let i = 0; i < events; i += perChunk) {
    let text = '';
    for (let k = i; k < Math.min(events, i + perChunk); k++) {
      text += `id: ${k + 3}\ndata: {"id":"${k + 3}","payload":{"pad":"id: data: \\nid: "}}\n\n`;
      if (withResetAndComments && k % 3 === 0) text += ': keep-alive\n\n';
    }
    parts.push(`${Buffer.byteLength(text).toString(16)}\r\n${text}\r\n`);
  }
  return Buffer.from(parts.join(''));
}

/**
 * Feeds `body` to `count` in reads of the given sizes, each read copied to the start of one
 * shared buffer whose other bytes are `stale` (as another socket's longer read left them).
 */
function readThroughSharedBuffer(body, sizes, stale, count) {
  const shared = Buffer.alloc(Math.max(stale.length, 1024));
  stale.copy(shared);
  let total = 0;
  let at = 0;
  let i = 0;
  while (at < body.length) {
    const n = Math.min(sizes[i++ % sizes.length], body.length - at, shared.length);
    body.copy(shared, 0, at, at + n);
    at += n;
    total += count(shared, 0, n) ?? 0;
  }
  return total;
}

describe('sseCounter', () => {
  it('counts each event of its own reads once, never the stale bytes after them', () => {
    const stale = sseBody(40, 40, false);
    fc.assert(
      fc.property(
        fc.integer({ min: 0, max: 60 }),
        fc.integer({ min: 1, max: 7 }),
        fc.array(fc.integer({ min: 1, max: 300 }), { minLength: 1, maxLength: 20 }),
        fc.boolean(),
        (events, perChunk, sizes, noise) => {
          const body = sseBody(events, perChunk, noise);
          expect(readThroughSharedBuffer(body, sizes, stale, sseCounter())).toBe(events);
        },
      ),
    );
  });

  it('counts an id line split across two reads once', () => {
    const body = sseBody(1, 1, false);
    const idAt = body.indexOf('\nid: ');
    for (let cut = idAt; cut <= idAt + 5; cut++) {
      expect(readThroughSharedBuffer(body, [cut, body.length], Buffer.alloc(0), sseCounter())).toBe(1);
    }
  });
});

/** Server WebSocket frames (unmasked) carrying socket.io packets: `42[...]` events and pings. */
function wsBody(events) {
  const frames = [];
  const frame = (text) => {
    const payload = Buffer.from(text);
    const len = payload.length;
    const head =
      len < 126
        ? Buffer.from([0x81, len])
        : len < 65536
          ? Buffer.from([0x81, 126, len >> 8, len & 0xff])
          : (() => {
              const h = Buffer.alloc(10);
              h[0] = 0x81;
              h[1] = 127;
              h.writeBigUInt64BE(BigInt(len), 2);
              return h;
            })();
    frames.push(head, payload);
  };
  frame('0{"sid":"x"}');
  frame('40{"sid":"y"}');
  for (let i = 0; i < events; i++) {
    frame(`42["event",{"id":"${i}","pad":"${'p'.repeat((i * 37) % 300)}"}]`);
    if (i % 5 === 0) frame('2');
  }
  frame('');
  return Buffer.concat(frames);
}

describe('wsFrames', () => {
  it('finds each socket.io event of its own reads once, never the stale bytes after them', () => {
    const stale = wsBody(30);
    fc.assert(
      fc.property(
        fc.integer({ min: 0, max: 40 }),
        fc.array(fc.integer({ min: 1, max: 200 }), { minLength: 1, maxLength: 20 }),
        (events, sizes) => {
          let counted = 0;
          const parse = wsFrames((a, b) => {
            if (a === 0x34 && b === 0x32) counted++;
          });
          readThroughSharedBuffer(wsBody(events), sizes, stale, parse);
          expect(counted).toBe(events);
        },
      ),
    );
  });
});
