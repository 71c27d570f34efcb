// SHA-1 (FIPS 180-4) in plain JavaScript, for the one place an idle svcd needs it: checking
// Sec-WebSocket-Accept in the WebSocket handshake (websocket-client.ts), without loading
// node:crypto (random.ts says why). Not for security decisions: SHA-1 is broken for those.

function rotl(x: number, n: number): number {
  return (x << n) | (x >>> (32 - n));
}

/** The 20-byte SHA-1 digest of `data`. */
export function sha1(data: Uint8Array): Buffer {
  const bitLen = data.length * 8;
  const padded = Buffer.alloc((((data.length + 8) >> 6) + 1) * 64);
  padded.set(data);
  padded[data.length] = 0x80;
  // The length in bits, big-endian 64-bit (inputs here are far below 2^53 bits).
  padded.writeUInt32BE(Math.floor(bitLen / 0x100000000), padded.length - 8);
  padded.writeUInt32BE(bitLen >>> 0, padded.length - 4);
  let h0 = 0x67452301;
  let h1 = 0xefcdab89;
  let h2 = 0x98badcfe;
  let h3 = 0x10325476;
  let h4 = 0xc3d2e1f0;
  const w = new Int32Array(80);
  for (let off = 0; off < padded.length; off += 64) {
    for (let i = 0; i < 16; i++) w[i] = padded.readInt32BE(off + i * 4);
    for (let i = 16; i < 80; i++) w[i] = rotl(w[i - 3]! ^ w[i - 8]! ^ w[i - 14]! ^ w[i - 16]!, 1);
    let a = h0;
    let b = h1;
    let c = h2;
    let d = h3;
    let e = h4;
    for (let i = 0; i < 80; i++) {
      let f: number;
      let k: number;
      if (i < 20) {
        f = (b & c) | (~b & d);
        k = 0x5a827999;
      } else if (i < 40) {
        f = b ^ c ^ d;
        k = 0x6ed9eba1;
      } else if (i < 60) {
        f = (b & c) | (b & d) | (c & d);
        k = 0x8f1bbcdc;
      } else {
        f = b ^ c ^ d;
        k = 0xca62c1d6;
      }
      const t = (rotl(a, 5) + f + e + k + w[i]!) | 0;
      e = d;
      d = c;
      c = rotl(b, 30);
      b = a;
      a = t;
    }
    h0 = (h0 + a) | 0;
    h1 = (h1 + b) | 0;
    h2 = (h2 + c) | 0;
    h3 = (h3 + d) | 0;
    h4 = (h4 + e) | 0;
  }
  const out = Buffer.alloc(20);
  for (const [i, h] of [h0, h1, h2, h3, h4].entries()) out.writeInt32BE(h, i * 4);
  return out;
}
