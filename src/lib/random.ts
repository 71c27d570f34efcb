// Cryptographically strong random bytes read from the kernel (/dev/urandom), for the code an
// idle svcd runs (ids, session tokens, attach secret, WebSocket keys and masks). node:crypto
// gives the same bytes, but loading it initialises OpenSSL: ≈1.2 MiB more RSS for the daemon's
// whole life (docs/perf-notes.md, daemon). Bytes are read ahead in a small pool, never handed out twice.
import { closeSync, openSync, readSync } from 'node:fs';

const POOL_BYTES = 4096;
const pool = Buffer.alloc(POOL_BYTES);
let used = POOL_BYTES;

function fill(target: Buffer): void {
  const fd = openSync('/dev/urandom', 'r');
  try {
    let off = 0;
    while (off < target.length) off += readSync(fd, target, off, target.length - off, null);
  } finally {
    closeSync(fd);
  }
}

/** `n` random bytes in a new Buffer (like crypto.randomBytes). */
export function randomBytes(n: number): Buffer {
  if (!Number.isInteger(n) || n < 0) throw new RangeError(`randomBytes: bad size ${n}`);
  const out = Buffer.allocUnsafe(n);
  if (n > POOL_BYTES / 4) {
    fill(out);
    return out;
  }
  if (used + n > POOL_BYTES) {
    fill(pool);
    used = 0;
  }
  pool.copy(out, 0, used, used + n);
  // Handed-out bytes are wiped so they are not kept in memory beside what they became.
  pool.fill(0, used, used + n);
  used += n;
  return out;
}
