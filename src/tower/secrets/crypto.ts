// AES-256-GCM sealing of secret values under a master key. Pure functions: no I/O, no key
// storage. Each value gets a fresh 96-bit nonce; the associated data binds a ciphertext to
// the secret id and version it was written for, so rows cannot be swapped in the database.
import { createCipheriv, createDecipheriv, createHash, randomBytes } from 'node:crypto';

export const KEY_BYTES = 32;
const NONCE_BYTES = 12;
const TAG_BYTES = 16;

export interface Sealed {
  /** base64 */
  nonce: string;
  /** base64 of ciphertext || 16-byte GCM tag */
  ciphertext: string;
}

/** Public fingerprint of a master key ("mk_" + 16 hex digits); reveals nothing about the key. */
export function keyIdOf(key: Buffer): string {
  return `mk_${createHash('sha256').update('svc master key id\0').update(key).digest('hex').slice(0, 16)}`;
}

export function associatedData(secretId: string, version: number): Buffer {
  return Buffer.from(`svc-secret:v1\0${secretId}\0${version}`, 'utf8');
}

export function seal(key: Buffer, plaintext: string, aad: Buffer): Sealed {
  if (key.length !== KEY_BYTES) throw new Error('master key must be 32 bytes');
  const nonce = randomBytes(NONCE_BYTES);
  const cipher = createCipheriv('aes-256-gcm', key, nonce, { authTagLength: TAG_BYTES });
  cipher.setAAD(aad);
  const body = Buffer.concat([cipher.update(plaintext, 'utf8'), cipher.final(), cipher.getAuthTag()]);
  return { nonce: nonce.toString('base64'), ciphertext: body.toString('base64') };
}

/** Throws an Error (without any plaintext) when the key, the data or the AAD do not match. */
export function open(key: Buffer, sealed: Sealed, aad: Buffer): string {
  const nonce = Buffer.from(sealed.nonce, 'base64');
  const body = Buffer.from(sealed.ciphertext, 'base64');
  if (nonce.length !== NONCE_BYTES || body.length < TAG_BYTES) throw new Error('malformed ciphertext');
  const decipher = createDecipheriv('aes-256-gcm', key, nonce, { authTagLength: TAG_BYTES });
  decipher.setAAD(aad);
  decipher.setAuthTag(body.subarray(body.length - TAG_BYTES));
  try {
    return Buffer.concat([
      decipher.update(body.subarray(0, body.length - TAG_BYTES)),
      decipher.final(),
    ]).toString('utf8');
  } catch {
    throw new Error('authentication failed: wrong key or tampered ciphertext');
  }
}
