import { createHash } from 'node:crypto';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { sha1 } from './sha1.js';

describe('sha1', () => {
  it('gives the FIPS 180 test vectors', () => {
    expect(sha1(Buffer.from('abc')).toString('hex')).toBe('a9993e364706816aba3e25717850c26c9cd0d89d');
    expect(sha1(Buffer.alloc(0)).toString('hex')).toBe('da39a3ee5e6b4b0d3255bfef95601890afd80709');
    expect(
      sha1(Buffer.from('abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq')).toString('hex'),
    ).toBe('84983e441c3bd26ebaae4aa1f95129e5e54670f1');
  });

  it('computes the Sec-WebSocket-Accept of RFC 6455 section 1.3', () => {
    const key = 'dGhlIHNhbXBsZSBub25jZQ==258EAFA5-E914-47DA-95CA-C5AB0DC85B11';
    expect(sha1(Buffer.from(key)).toString('base64')).toBe('s3pPLMBiTxaQ9kYGzzhZRbK+xOo=');
  });

  it('agrees with node:crypto on any input, across block boundaries', () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 300 }), (bytes) => {
        expect(sha1(bytes).toString('hex')).toBe(createHash('sha1').update(bytes).digest('hex'));
      }),
      { numRuns: 500 },
    );
  });
});
