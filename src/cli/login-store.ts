// Where svc finds the tower and its credential: flags, then SVC_BASE_URL / SVC_TOKEN, then
// $SVC_HOME/credentials.json (written by `svc login`, 0600), then a local tower's bootstrap
// admin token ($SVC_HOME/tower/admin.token), which is what `svc up` leaves behind.
import { chmod, mkdir, readFile, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { checkBaseUrl, DEFAULT_BASE_URL } from '../lib/url.js';
import { SvcError } from '../protocol/errors.js';
import type { CliIO } from './io.js';

export interface Credentials {
  url: string;
  token: string | null;
}

interface StoredCredentials {
  url?: string;
  token?: string;
}

async function readJson(file: string): Promise<StoredCredentials | null> {
  try {
    return JSON.parse(await readFile(file, 'utf8')) as StoredCredentials;
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw new SvcError(
      'config_invalid',
      `cannot read ${file}: ${(e as Error).message}; run "svc login" again`,
    );
  }
}

async function readText(file: string): Promise<string | null> {
  try {
    return (await readFile(file, 'utf8')).trim() || null;
  } catch {
    return null;
  }
}

/** An empty environment variable counts as unset. */
const envValue = (v: string | undefined): string | undefined => (v === undefined || v === '' ? undefined : v);

export async function resolveCredentials(
  io: CliIO,
  flags: { url?: string; token?: string },
): Promise<Credentials> {
  const stored = await readJson(io.paths.credentialsFile);
  const rawUrl = flags.url ?? envValue(io.env.SVC_BASE_URL) ?? stored?.url ?? DEFAULT_BASE_URL;
  let url: string;
  try {
    url = checkBaseUrl(rawUrl, io.env.SVC_ALLOW_INSECURE === '1');
  } catch (e) {
    throw new SvcError('config_invalid', (e as Error).message);
  }
  const token =
    flags.token ??
    envValue(io.env.SVC_TOKEN) ??
    stored?.token ??
    (await readText(join(io.paths.towerDir, 'admin.token')));
  return { url, token: token ?? null };
}

export async function saveCredentials(io: CliIO, creds: { url: string; token: string }): Promise<void> {
  const file = io.paths.credentialsFile;
  await mkdir(dirname(file), { recursive: true, mode: 0o700 });
  await writeFile(file, `${JSON.stringify(creds, null, 2)}\n`, { mode: 0o600 });
  await chmod(file, 0o600);
}
