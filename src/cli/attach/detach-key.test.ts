import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { DetachKey, ESCAPE } from './detach-key.js';

const b = (...xs: (number | string)[]) =>
  Buffer.concat(xs.map((x) => (typeof x === 'number' ? Buffer.from([x]) : Buffer.from(x))));

describe('the detach key', () => {
  it('detaches on Ctrl-] then d and forwards what came before', () => {
    expect(new DetachKey().feed(b('ls', ESCAPE, 'd', 'x'))).toEqual({ forward: b('ls'), detach: true });
  });

  it('detaches when the two keys arrive in separate chunks', () => {
    const k = new DetachKey();
    expect(k.feed(b('a', ESCAPE))).toEqual({ forward: b('a'), detach: false });
    expect(k.feed(b('D'))).toEqual({ forward: b(), detach: true });
  });

  it('sends one Ctrl-] for Ctrl-] twice, and Ctrl-] with any other key as typed', () => {
    const k = new DetachKey();
    expect(k.feed(b(ESCAPE, ESCAPE, 'q', ESCAPE, 'x'))).toEqual({
      forward: b(ESCAPE, 'q', ESCAPE, 'x'),
      detach: false,
    });
  });

  it('forwards input without the escape byte unchanged', () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 200 }), (bytes) => {
        const input = Buffer.from(bytes.filter((x) => x !== ESCAPE));
        expect(new DetachKey().feed(input)).toEqual({ forward: input, detach: false });
      }),
    );
  });
});
