// Master key material: parsing SVC_MASTER_KEY, reading and writing <data-dir>/master.key.
// A key list holds one or more 32-byte keys (base64 or hex), the first encrypts and the
// others only decrypt, as in Kubernetes' EncryptionConfiguration. Error messages name the
// source and the entry number, never the key text.
import { randomBytes } from 'node:crypto';
import { chmod, open, readFile, rename, stat, unlink } from 'node:fs/promises';
import { SvcError } from '../../protocol/errors.js';
import { KEY_BYTES } from './crypto.js';

export const MASTER_KEY_FILE = 'master.key';

export function generateKey(): Buffer {
  return randomBytes(KEY_BYTES);
}

function decodeKey(entry: string): Buffer | null {
  if (/^[0-9a-fA-F]{64}$/.test(entry)) return Buffer.from(entry, 'hex');
  if (/^[A-Za-z0-9+/_-]{43}=?$/.test(entry)) {
    const buf = Buffer.from(entry.replace(/-/g, '+').replace(/_/g, '/'), 'base64');
    return buf.length === KEY_BYTES ? buf : null;
  }
  return null;
}

/**
 * Parses a key list: entries separated by newlines or commas; blank lines and lines
 * starting with # are ignored. `where` names the source in errors ("SVC_MASTER_KEY").
 */
export function parseKeyList(text: string, where: string): Buffer[] {
  const entries = text
    .split(/[\n,]/)
    .map((e) => e.trim())
    .filter((e) => e.length > 0 && !e.startsWith('#'));
  if (entries.length === 0) {
    throw new SvcError('config_invalid', `${where} holds no key: expected 32 random bytes, base64 or hex`);
  }
  const keys: Buffer[] = [];
  entries.forEach((entry, i) => {
    const key = decodeKey(entry);
    if (!key) {
      throw new SvcError(
        'config_invalid',
        `${where}: entry ${i + 1} is not a 32-byte key in base64 (44 characters) or hex (64 digits); make one with "openssl rand -base64 32"`,
      );
    }
    keys.push(key);
  });
  return keys;
}

export function formatKeyList(keys: Buffer[]): string {
  return `${keys.map((k) => k.toString('base64')).join('\n')}\n`;
}

/** Reads a key file; null when it does not exist. Refuses files others can read. */
export async function readKeyFile(file: string): Promise<Buffer[] | null> {
  let mode: number;
  try {
    mode = (await stat(file)).mode;
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw new SvcError('config_invalid', `cannot read ${file}: ${(e as Error).message}`);
  }
  if ((mode & 0o077) !== 0) {
    throw new SvcError(
      'config_invalid',
      `${file} is accessible by group or others (mode ${(mode & 0o777).toString(8)}): run "chmod 600 ${file}"`,
    );
  }
  return parseKeyList(await readFile(file, 'utf8'), file);
}

/** Replaces the key file atomically (temp file 0600, fsync, rename), so a crash leaves the old or the new list. */
export async function writeKeyFile(file: string, keys: Buffer[]): Promise<void> {
  const tmp = `${file}.tmp`;
  await unlink(tmp).catch(() => {});
  const fh = await open(tmp, 'wx', 0o600);
  try {
    await fh.writeFile(formatKeyList(keys));
    await fh.sync();
  } finally {
    await fh.close();
  }
  await chmod(tmp, 0o600);
  await rename(tmp, file);
}
