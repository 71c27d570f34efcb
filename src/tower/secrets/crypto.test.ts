import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { gate } from '../../../test/support/poll.js';
import { associatedData, keyIdOf, open, seal } from './crypto.js';
import { Keyring } from './keyring.js';
import { formatKeyList, generateKey, parseKeyList } from './master-key.js';

describe('sealing secret values', () => {
  const key = generateKey();

  it('opens what it sealed, for any text', () => {
    fc.assert(
      fc.property(fc.string({ unit: 'binary' }), fc.string(), fc.integer({ min: 1 }), (text, id, version) => {
        const aad = associatedData(id, version);
        expect(open(key, seal(key, text, aad), aad)).toBe(text);
      }),
      { numRuns: 200 },
    );
  });

  it('never emits the plaintext and uses a fresh nonce each time', () => {
    const aad = associatedData('sec_1', 1);
    const a = seal(key, 'hunter2-hunter2', aad);
    const b = seal(key, 'hunter2-hunter2', aad);
    expect(a.nonce).not.toBe(b.nonce);
    expect(a.ciphertext).not.toBe(b.ciphertext);
    expect(Buffer.from(a.ciphertext, 'base64').includes(Buffer.from('hunter2'))).toBe(false);
    expect(JSON.stringify(a)).not.toContain('hunter2');
  });

  it('refuses another key, another row, and tampered bytes', () => {
    const aad = associatedData('sec_1', 1);
    const sealed = seal(key, 'value', aad);
    expect(() => open(generateKey(), sealed, aad)).toThrow('authentication failed');
    expect(() => open(key, sealed, associatedData('sec_2', 1))).toThrow('authentication failed');
    expect(() => open(key, sealed, associatedData('sec_1', 2))).toThrow('authentication failed');
    const bytes = Buffer.from(sealed.ciphertext, 'base64');
    bytes[0] = (bytes[0] ?? 0) ^ 1;
    expect(() => open(key, { ...sealed, ciphertext: bytes.toString('base64') }, aad)).toThrow(
      'authentication failed',
    );
    expect(() => open(key, { nonce: 'AAAA', ciphertext: sealed.ciphertext }, aad)).toThrow('malformed');
  });

  it('fingerprints keys stably without revealing them', () => {
    const id = keyIdOf(key);
    expect(id).toMatch(/^mk_[0-9a-f]{16}$/);
    expect(keyIdOf(Buffer.from(key))).toBe(id);
    expect(keyIdOf(generateKey())).not.toBe(id);
    expect(id).not.toContain(key.toString('hex').slice(0, 16));
  });
});

describe('master key lists', () => {
  it('reads base64, base64url and hex entries separated by newlines or commas, skipping comments', () => {
    const a = generateKey();
    const b = generateKey();
    const c = generateKey();
    const text = `# rotated 2024\n${a.toString('base64')}\n\n${b.toString('base64url')},${c.toString('hex')}\n`;
    expect(parseKeyList(text, 'test').map(keyIdOf)).toEqual([a, b, c].map(keyIdOf));
    expect(parseKeyList(formatKeyList([c, a]), 'file').map(keyIdOf)).toEqual([c, a].map(keyIdOf));
  });

  it('names the source and entry of a bad key without echoing it', () => {
    const good = generateKey().toString('base64');
    const bad = 'c2VjcmV0IGlzIHNlY3VyZQ==';
    let message = '';
    try {
      parseKeyList(`${good},${bad}`, 'SVC_MASTER_KEY');
    } catch (e) {
      message = (e as Error).message;
      expect((e as { code?: string }).code).toBe('config_invalid');
    }
    expect(message).toContain('SVC_MASTER_KEY: entry 2 is not a 32-byte key');
    expect(message).not.toContain(bad);
    expect(message).not.toContain(good);
    expect(() => parseKeyList('# only a comment\n', 'f')).toThrow('f holds no key');
  });
});

describe('the keyring', () => {
  it('encrypts with the first key and decrypts with any', async () => {
    const oldKey = generateKey();
    const newKey = generateKey();
    const ring = new Keyring([oldKey]);
    const aad = associatedData('sec_1', 1);
    const sealed = await ring.withCurrent(async (s) => ({ keyId: s.keyId, sealed: s.seal('v', aad) }));
    expect(sealed.keyId).toBe(keyIdOf(oldKey));
    await ring.replace([newKey, oldKey]);
    expect(ring.currentKeyId).toBe(keyIdOf(newKey));
    expect(ring.info().previousKeyIds).toEqual([keyIdOf(oldKey)]);
    expect(ring.open(sealed.keyId, sealed.sealed, aad)).toBe('v');
    await ring.replace([newKey]);
    expect(() => ring.open(sealed.keyId, sealed.sealed, aad)).toThrow(
      `master key ${keyIdOf(oldKey)} is not configured`,
    );
  });

  it('swaps keys only after writers holding the old key have finished', async () => {
    const oldKey = generateKey();
    const newKey = generateKey();
    const ring = new Keyring([oldKey]);
    const order: string[] = [];
    const held = gate();
    const writer = ring.withCurrent(async (s) => {
      order.push(`write-start ${s.keyId === keyIdOf(oldKey) ? 'old' : 'new'}`);
      await held.opened;
      order.push('write-end');
    });
    const swap = ring.replace([newKey]);
    const later = ring.withCurrent(async (s) => {
      order.push(`late-write ${s.keyId === keyIdOf(newKey) ? 'new' : 'old'}`);
    });
    await new Promise((r) => setImmediate(r));
    expect(order).toEqual(['write-start old']);
    held.open();
    await Promise.all([writer, swap, later]);
    // The writer that arrived during the swap waited for it and sealed under the new key.
    expect(order).toEqual(['write-start old', 'write-end', 'late-write new']);
    expect(ring.currentKeyId).toBe(keyIdOf(newKey));
  });
});
