// The tower's master keys in memory: one current key that encrypts, older ones that only
// decrypt, each known by its fingerprint. Writers encrypt inside withCurrent(); rotation
// swaps the current key only when no writer still holds the old one, so once replace()
// returns, nothing can commit a new version under the old key.
import { keyIdOf, open, type Sealed, seal } from './crypto.js';

export interface KeyringInfo {
  currentKeyId: string;
  previousKeyIds: string[];
}

export class Keyring {
  private keys = new Map<string, Buffer>();
  private current!: { id: string; key: Buffer };
  private readers = 0;
  private drained: (() => void) | null = null;
  private swapping: Promise<void> | null = null;

  /** keys[0] encrypts; all decrypt. */
  constructor(keys: Buffer[]) {
    this.set(keys);
  }

  get currentKeyId(): string {
    return this.current.id;
  }

  get keyIds(): string[] {
    return [...this.keys.keys()];
  }

  has(keyId: string): boolean {
    return this.keys.has(keyId);
  }

  info(): KeyringInfo {
    return {
      currentKeyId: this.current.id,
      previousKeyIds: this.keyIds.filter((id) => id !== this.current.id),
    };
  }

  /**
   * Runs fn with a sealer bound to the current key. Rotation waits for every running fn,
   * so a version sealed here is committed before the key can change.
   */
  async withCurrent<T>(
    fn: (sealer: { keyId: string; seal(plaintext: string, aad: Buffer): Sealed }) => Promise<T>,
  ): Promise<T> {
    while (this.swapping) await this.swapping;
    this.readers++;
    const { id, key } = this.current;
    try {
      return await fn({ keyId: id, seal: (p, aad) => seal(key, p, aad) });
    } finally {
      this.readers--;
      if (this.readers === 0) this.drained?.();
    }
  }

  /** Decrypts with the key the version names; throws if that key is not held. */
  open(keyId: string, sealed: Sealed, aad: Buffer): string {
    const key = this.keys.get(keyId);
    if (!key) throw new Error(`master key ${keyId} is not configured on this tower`);
    return open(key, sealed, aad);
  }

  /** Seals under a named key: used only by re-encryption, which always targets the current key. */
  sealWith(keyId: string, plaintext: string, aad: Buffer): Sealed {
    const key = this.keys.get(keyId);
    if (!key) throw new Error(`master key ${keyId} is not configured on this tower`);
    return seal(key, plaintext, aad);
  }

  /** Installs a new key list (keys[0] current) once every in-flight writer has finished. */
  async replace(keys: Buffer[]): Promise<void> {
    while (this.swapping) await this.swapping;
    let done!: () => void;
    this.swapping = new Promise<void>((r) => {
      done = r;
    });
    try {
      if (this.readers > 0) {
        await new Promise<void>((r) => {
          this.drained = r;
        });
        this.drained = null;
      }
      this.set(keys);
    } finally {
      this.swapping = null;
      done();
    }
  }

  private set(keys: Buffer[]): void {
    const first = keys[0];
    if (!first) throw new Error('a keyring needs at least one key');
    this.keys = new Map(keys.map((k) => [keyIdOf(k), k]));
    this.current = { id: keyIdOf(first), key: first };
  }
}
