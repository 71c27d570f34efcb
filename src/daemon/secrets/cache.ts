// Optional short-lived memory cache of fetched values (off by default). Entries expire after
// an explicit TTL on the injected clock; nothing is ever written anywhere. With the cache
// off, a revocation on the tower takes effect at the very next request.
import type { Clock } from '../../lib/clock.js';

/** Bounds memory: past this many entries the oldest are dropped. */
const MAX_ENTRIES = 10_000;

interface Entry {
  value: string;
  expiresAt: number;
}

export class SecretCache {
  private readonly entries = new Map<string, Entry>();

  constructor(
    private readonly clock: Clock,
    readonly ttlMs: number,
  ) {
    if (!(ttlMs > 0)) throw new Error('cache TTL must be positive');
  }

  get(agentId: string, name: string): string | null {
    const key = `${agentId}\0${name}`;
    const e = this.entries.get(key);
    if (!e) return null;
    if (e.expiresAt <= this.clock.now()) {
      this.entries.delete(key);
      return null;
    }
    return e.value;
  }

  set(agentId: string, name: string, value: string): void {
    const key = `${agentId}\0${name}`;
    this.entries.delete(key);
    this.entries.set(key, { value, expiresAt: this.clock.now() + this.ttlMs });
    while (this.entries.size > MAX_ENTRIES) {
      const oldest = this.entries.keys().next().value;
      if (oldest === undefined) break;
      this.entries.delete(oldest);
    }
  }

  clear(): void {
    this.entries.clear();
  }

  get size(): number {
    return this.entries.size;
  }
}
