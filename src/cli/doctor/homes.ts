// SVC_HOME, SVC_SKILLS_HOME and the local swarm agent_id: where they are and what
// `svc system doctor --fix` does to them. Every fix is idempotent: a second run changes nothing,
// and an agent_id once seeded is never replaced (it is the swarm's stable identity).
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { Clock } from '../../lib/clock.js';
import { newId } from '../../lib/ids.js';
import type { Fix } from './report.js';

/** SVC_SKILLS_HOME, else $SVC_HOME/skills: the skills shared by the agents of this machine. */
export function skillsHome(env: NodeJS.ProcessEnv, home: string): { path: string; fromEnv: boolean } {
  const v = env.SVC_SKILLS_HOME;
  return v ? { path: v, fromEnv: true } : { path: join(home, 'skills'), fromEnv: false };
}

/** One line holding the agent_id local swarms share: `$SVC_HOME/agent_id`. */
export function agentIdFile(home: string): string {
  return join(home, 'agent_id');
}

const AGENT_ID = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$/;

export async function readAgentId(file: string): Promise<{ value: string | null; error: string | null }> {
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    return code === 'ENOENT' ? { value: null, error: null } : { value: null, error: code ?? String(e) };
  }
  const v = text.trim();
  if (!AGENT_ID.test(v)) {
    return { value: null, error: 'does not hold an agent_id (one line of letters, digits, "_", "-", ".")' };
  }
  return { value: v, error: null };
}

export async function ensureDir(name: string, path: string): Promise<Fix> {
  // mkdir -p returns the first directory it created, undefined when all existed.
  let made: string | undefined;
  try {
    made = await mkdir(path, { recursive: true, mode: 0o700 });
  } catch (e) {
    return { name, action: `could not create ${path}: ${(e as Error).message}`, changed: false };
  }
  return made === undefined
    ? { name, action: `${path} already present`, changed: false }
    : { name, action: `created ${path} (0700)`, changed: true };
}

export async function applyFixes(env: NodeJS.ProcessEnv, home: string, clock: Clock): Promise<Fix[]> {
  const fixes = [
    await ensureDir('svc_home', home),
    await ensureDir('svc_skills_home', skillsHome(env, home).path),
  ];
  const file = agentIdFile(home);
  const current = await readAgentId(file);
  if (current.value) {
    fixes.push({ name: 'agent_id', action: `${current.value} already seeded`, changed: false });
  } else if (current.error) {
    fixes.push({ name: 'agent_id', action: `left ${file} alone: it ${current.error}`, changed: false });
  } else {
    const id = newId('ag', clock.now());
    try {
      // wx: two doctors racing both try; the loser keeps the winner's id.
      await writeFile(file, `${id}\n`, { mode: 0o600, flag: 'wx' });
      fixes.push({ name: 'agent_id', action: `seeded ${id} in ${file}`, changed: true });
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'EEXIST') throw e;
      const won = await readAgentId(file);
      fixes.push({ name: 'agent_id', action: `${won.value ?? '?'} already seeded`, changed: false });
    }
  }
  return fixes;
}
