// Opaque, time-sortable ids ("dom_01J…"): 48-bit millisecond time + 80 random bits in
// Crockford base32, monotonic within one process so ids made in one millisecond still sort.
import { randomBytes } from 'node:crypto';

const ALPHABET = '0123456789ABCDEFGHJKMNPQRSTVWXYZ';

let lastTime = -1;
let lastRandom: Uint8Array = new Uint8Array(10);

function encodeTime(ms: number): string {
  let out = '';
  let t = ms;
  for (let i = 0; i < 10; i++) {
    out = ALPHABET[t % 32] + out;
    t = Math.floor(t / 32);
  }
  return out;
}

function encodeRandom(bytes: Uint8Array): string {
  // 80 bits -> 16 base32 chars.
  let bits = 0n;
  for (const b of bytes) bits = (bits << 8n) | BigInt(b);
  let out = '';
  for (let i = 0; i < 16; i++) {
    out = ALPHABET[Number(bits & 31n)] + out;
    bits >>= 5n;
  }
  return out;
}

function increment(bytes: Uint8Array): Uint8Array {
  const next = new Uint8Array(bytes);
  for (let i = next.length - 1; i >= 0; i--) {
    if (next[i]! < 255) {
      next[i]! += 1;
      return next;
    }
    next[i] = 0;
  }
  return next;
}

/** A new id with the given prefix, e.g. newId('dom', clock.now()). */
export function newId(prefix: string, nowMs: number): string {
  if (nowMs <= lastTime) {
    lastRandom = increment(lastRandom);
  } else {
    lastTime = nowMs;
    lastRandom = new Uint8Array(randomBytes(10));
  }
  return `${prefix}_${encodeTime(lastTime)}${encodeRandom(lastRandom)}`.toLowerCase();
}

/** 256 bits of randomness, base64url: session ids, attach secrets, tokens. */
export function randomToken(bytes = 32): string {
  return randomBytes(bytes).toString('base64url');
}
