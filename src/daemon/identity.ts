// The node identity file (docs/operator-guide.md, section 3): {node_id, hostname, backend_url, jwt},
// mode 0600. Where it lives, first match wins:
//   1. SVC_NODE_FILE, when set;
//   2. $SVC_HOME/node.json, when SVC_HOME is set explicitly (a second install, a test, svc up);
//   3. /etc/svc/node.json (the documented system place): read when it exists, written when /etc/svc is
//      writable;
//   4. ~/.svc/node.json otherwise.
// nodeFile() says which and why, so `svc system doctor` can show it.
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

/** The identity file to use and why (for `svc system doctor`). */
export interface NodeFileChoice {
  file: string;
  why: string;
}

/**
 * Where the identity is read from (`read`) or written to by `svc agent node register`
 * (`write`). `home` is the resolved SVC_HOME (~/.svc when unset); `system` is replaceable for
 * tests.
 */
export function nodeFile(
  env: NodeJS.ProcessEnv,
  home: string,
  purpose: 'read' | 'write',
  system: string = SYSTEM_NODE_FILE,
): NodeFileChoice {
  if (env.SVC_NODE_FILE) return { file: env.SVC_NODE_FILE, why: 'SVC_NODE_FILE is set' };
  const own = join(home, 'node.json');
  if (env.SVC_HOME) return { file: own, why: `SVC_HOME is set; ${system} is not used` };
  if (purpose === 'read' && existsSync(system)) {
    return { file: system, why: 'the system identity (neither SVC_NODE_FILE nor SVC_HOME is set)' };
  }
  if (purpose === 'read' && existsSync(own)) {
    return { file: own, why: `no ${system}, the identity of the default SVC_HOME` };
  }
  if (writable(dirname(system))) {
    return { file: system, why: `the system identity: ${dirname(system)} is writable` };
  }
  return { file: own, why: `${dirname(system)} is not writable, the default SVC_HOME` };
}

/** Where the identity file is read from. */
export function nodeFileForRead(env: NodeJS.ProcessEnv, home: string): string {
  return nodeFile(env, home, 'read').file;
}

/** Where `svc agent node register` writes the identity file. */
export function nodeFileForWrite(env: NodeJS.ProcessEnv, home: string): string {
  return nodeFile(env, home, 'write').file;
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
