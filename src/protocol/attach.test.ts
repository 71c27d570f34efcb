import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { ATTACH_FRAME_BYTES, parseViewerFrame, splitFrames, TOWER_MAX_FRAME_BYTES } from './attach.js';

describe('splitFrames', () => {
  it('cuts terminal bytes into frames no bigger than the limit, losing and reordering nothing', () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 3000 }), fc.integer({ min: 1, max: 700 }), (bytes, max) => {
        const frames = splitFrames(Buffer.from(bytes), max);
        expect(Buffer.concat(frames).equals(Buffer.from(bytes))).toBe(true);
        for (const f of frames) expect(f.length).toBeLessThanOrEqual(max);
        expect(frames.length).toBe(Math.max(1, Math.ceil(bytes.length / max)));
      }),
    );
  });

  it('keeps frames within what the tower accepts by default', () => {
    expect(ATTACH_FRAME_BYTES).toBeLessThanOrEqual(TOWER_MAX_FRAME_BYTES);
    const frames = splitFrames(Buffer.alloc(5 * ATTACH_FRAME_BYTES + 1));
    expect(frames.map((f) => f.length)).toEqual([...Array(5).fill(ATTACH_FRAME_BYTES), 1]);
  });
});

describe('parseViewerFrame', () => {
  it('accepts only a resize, with sizes clamped, and never throws', () => {
    expect(parseViewerFrame('{"type":"resize","cols":1e308,"rows":-5}')).toEqual({
      type: 'resize',
      cols: 1000,
      rows: 1,
    });
    fc.assert(
      fc.property(
        fc.oneof(
          fc.json(),
          fc.string(),
          fc.jsonValue().map((v) => JSON.stringify(v)),
        ),
        (text) => {
          const f = parseViewerFrame(text);
          if (f === null) return;
          expect(f.type).toBe('resize');
          expect(f.cols).toBeGreaterThanOrEqual(2);
          expect(f.cols).toBeLessThanOrEqual(1000);
          expect(f.rows).toBeGreaterThanOrEqual(1);
          expect(f.rows).toBeLessThanOrEqual(500);
        },
      ),
    );
  });
});
