// Where the logs `svc logs` reads are, for this SVC_HOME (docs/operator-guide.md, "Logs"):
// the tower's and svcd's files as `svc up` and `svc daemon up` record them (up.json,
// svcd/daemon.json), the journal for what systemd runs (svcd.service, svc-tower.service, an
// agent's unit), and an agent's output log as svcd reports it (agent.status over mgmt.sock).
// Nothing here guesses: a path comes from a record, from svcd, from an installed unit, or from
// a documented place where the file exists.
import { existsSync, statSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { daemonPaths } from '../../daemon/paths.js';
import type { AgentStatus } from '../../protocol/agents.js';
import { isSvcError, SvcError } from '../../protocol/errors.js';
import { TOWER_UNIT } from '../commands/tower.js';
import { SVCD_UNIT } from '../svcd-process.js';
import { unitDir } from '../user-unit.js';

export type LogSource =
  | { name: string; kind: 'file'; file: string }
  | { name: string; kind: 'journal'; unit: string };

export interface SourceDeps {
  home: string;
  /** For the user unit directory (XDG_CONFIG_HOME, HOME). */
  env: NodeJS.ProcessEnv;
  /** agent.status over mgmt.sock (rejects with `unavailable` when svcd does not answer). */
  agentStatus(id: string): Promise<AgentStatus>;
}

async function readJson<T>(file: string): Promise<T | null> {
  return readFile(file, 'utf8')
    .then((t) => JSON.parse(t) as T)
    .catch(() => null);
}

/** The newest existing file of `files`, or null. */
function newestExisting(files: string[]): string | null {
  let best: { file: string; mtime: number } | null = null;
  for (const file of files) {
    if (!existsSync(file)) continue;
    const mtime = statSync(file).mtimeMs;
    if (!best || mtime > best.mtime) best = { file, mtime };
  }
  return best?.file ?? null;
}

/** `svc up` logs the tower to $SVC_HOME/logs/tower.log. */
export function upLogsDir(home: string): string {
  return join(home, 'logs');
}

async function towerSource(deps: SourceDeps): Promise<LogSource> {
  const file = join(upLogsDir(deps.home), 'tower.log');
  const up = await readJson<{ tower?: unknown }>(join(deps.home, 'up.json'));
  if (up?.tower && existsSync(file)) return { name: 'tower', kind: 'file', file };
  if (existsSync(join(unitDir(deps.env), TOWER_UNIT)))
    return { name: 'tower', kind: 'journal', unit: TOWER_UNIT };
  if (existsSync(file)) return { name: 'tower', kind: 'file', file };
  throw new SvcError(
    'not_found',
    `no tower log in ${deps.home}: "svc up" writes ${file}, the ${TOWER_UNIT} user unit logs to the journal; a tower started with "svc tower serve" logs to its stderr, or to its --log-file`,
  );
}

interface DaemonRecord {
  mode?: 'systemd' | 'detached';
  log?: string;
}

async function svcdSource(home: string): Promise<LogSource> {
  const record = await readJson<DaemonRecord>(join(daemonPaths(home).svcdDir, 'daemon.json'));
  if (record?.mode === 'systemd') return { name: 'svcd', kind: 'journal', unit: SVCD_UNIT };
  if (record?.mode === 'detached' && record.log) return { name: 'svcd', kind: 'file', file: record.log };
  // Started before daemon.json named its log: the two places svcd's log is written.
  const candidates = [join(upLogsDir(home), 'svcd.log'), join(daemonPaths(home).logsDir, 'svcd.log')];
  const file = newestExisting(candidates);
  if (file) return { name: 'svcd', kind: 'file', file };
  throw new SvcError(
    'not_found',
    `no svcd log in ${home}: "svc up" and "svc daemon up" write ${candidates.join(' or ')}; svcd run in the foreground logs to its stderr`,
  );
}

async function agentSource(id: string, deps: SourceDeps): Promise<LogSource> {
  try {
    const s = await deps.agentStatus(id);
    if (s.log_file) return { name: s.id, kind: 'file', file: s.log_file };
    return { name: s.id, kind: 'journal', unit: `${s.unit}.service` };
  } catch (e) {
    // svcd is down: its agents' logs stay where docs/agents.md says they are.
    const file = join(daemonPaths(deps.home).logsDir, `${id}.log`);
    if (!isSvcError(e) || e.code !== 'unavailable') throw e;
    if (existsSync(file)) return { name: id, kind: 'file', file };
    throw new SvcError(
      'unavailable',
      `${e.message}; without it only an agent id with a log in ${daemonPaths(deps.home).logsDir} can be shown, and there is no ${id}.log`,
    );
  }
}

/** `tower`, `svcd`, or an agent (id or profile) of this node. */
export function resolveSource(which: string, deps: SourceDeps): Promise<LogSource> {
  if (which === 'tower') return towerSource(deps);
  if (which === 'svcd') return svcdSource(deps.home);
  return agentSource(which, deps);
}

/** No source named: the tower and svcd, those this SVC_HOME has logs of. */
export async function defaultSources(deps: SourceDeps): Promise<LogSource[]> {
  const found: LogSource[] = [];
  for (const which of ['tower', 'svcd']) {
    const s = await resolveSource(which, deps).catch((e: unknown) => {
      if (isSvcError(e) && e.code === 'not_found') return null;
      throw e;
    });
    if (s) found.push(s);
  }
  if (found.length === 0) {
    throw new SvcError(
      'not_found',
      `no tower or svcd log in ${deps.home}: start them with "svc up", or name an agent (svc logs <agent_id>)`,
    );
  }
  return found;
}
