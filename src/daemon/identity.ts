// The node identity file (docs/operator-guide.md, 3): {node_id, hostname, backend_url, jwt}, mode 0600.
// Where it lives: SVC_NODE_FILE if set; else /etc/svc/node.json when it exists or /etc/svc is
// writable; else $SVC_HOME/node.json.
import { accessSync, constants, existsSync } from 'node:fs';
import { chmod, mkdir, readFile, rename, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { refuseSharedFiles } from '../lib/private-files.js';
import { SvcError } from '../protocol/errors.js';
import type { NodeIdentity } from '../protocol/nodes.js';

export const SYSTEM_NODE_FILE = '/etc/svc/node.json';

function writable(dir: string): boolean {
  try {
    accessSync(existsSync(dir) ? dir : dirname(dir), constants.W_OK);
    return true;
  } catch {
    return false;
  }
}

/** Where the identity file is read from. */
export function nodeFileForRead(env: NodeJS.ProcessEnv, home: string): string {
  if (env.SVC_NODE_FILE) return env.SVC_NODE_FILE;
  if (existsSync(SYSTEM_NODE_FILE)) return SYSTEM_NODE_FILE;
  return join(home, 'node.json');
}

/** Where `svc agent node register` writes the identity file. */
export function nodeFileForWrite(env: NodeJS.ProcessEnv, home: string): string {
  if (env.SVC_NODE_FILE) return env.SVC_NODE_FILE;
  if (writable(dirname(SYSTEM_NODE_FILE))) return SYSTEM_NODE_FILE;
  return join(home, 'node.json');
}

const REGISTER_HINT = 'run "svc agent node register --hostname <hostname>" first';

/**
 * Reads the identity file; refuses one that other users can read (it holds the node JWT),
 * unless `shared: 'report'` (svc system doctor reads it to report that itself).
 */
export async function readNodeIdentity(
  file: string,
  opts: { shared?: 'refuse' | 'report' } = {},
): Promise<NodeIdentity> {
  if (opts.shared !== 'report')
    refuseSharedFiles([file], 'The node identity file (it holds the node credential)');
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    throw new SvcError('config_invalid', `no node identity at ${file} (${code}): ${REGISTER_HINT}`);
  }
  let v: Partial<Record<keyof NodeIdentity, unknown>>;
  try {
    v = JSON.parse(text) as typeof v;
  } catch {
    throw new SvcError('config_invalid', `node identity ${file} is not valid JSON: ${REGISTER_HINT}`);
  }
  for (const k of ['node_id', 'hostname', 'backend_url', 'jwt'] as const) {
    if (typeof v[k] !== 'string' || v[k] === '') {
      throw new SvcError('config_invalid', `node identity ${file} lacks "${k}": ${REGISTER_HINT}`);
    }
  }
  return v as NodeIdentity;
}

/** Writes atomically (temp file + rename) with mode 0600. */
export async function writeNodeIdentity(file: string, id: NodeIdentity): Promise<void> {
  await mkdir(dirname(file), { recursive: true, mode: 0o700 });
  const tmp = `${file}.${process.pid}.tmp`;
  await writeFile(tmp, `${JSON.stringify(id, null, 2)}\n`, { mode: 0o600 });
  await chmod(tmp, 0o600);
  await rename(tmp, file);
}
