// agents.toml ($SVC_HOME/svcd/agents.toml): the supervised agents of this node, parsed in
// one place into AgentSpecs. Errors name the file, the line and the field (syntax errors,
// unknown runtimes, duplicate ids, impossible combinations); the supervisor applies a new
// file only when it parses completely, so a bad edit never disturbs running agents.
import { isAbsolute } from 'node:path';
import { RUNTIME_KINDS, type RuntimeKind } from '../../protocol/runtimes.js';
import { readTomlFile, rootReader, type TomlDoc } from '../config/toml.js';
import { RUNTIMES } from '../runtimes/kinds.js';
import { PLACEHOLDERS, unknownPlaceholder } from '../runtimes/template.js';
import { readTimeOfDay, type TimeOfDay } from './config-section.js';

export const BACKEND_KINDS = ['process', 'tmux', 'systemd'] as const;
export type BackendKind = (typeof BACKEND_KINDS)[number];

export interface AgentSpec {
  id: string;
  runtime: RuntimeKind;
  /** Replaces the runtime's config.toml template for this agent. */
  command: string[] | null;
  /** Working directory; null = $SVC_HOME/agents/<id>. */
  cwd: string | null;
  env: Record<string, string>;
  /** Started with svcd and kept running by the watchdog. */
  supervise: boolean;
  /** undefined: the [watchdog] default; null: off. */
  nightlyRestart: TimeOfDay | null | undefined;
  /** Run in a pseudo-terminal (process backend), so it can be attached to. */
  pty: boolean;
  /** null: chosen by runtime and host (mux_hosted → tmux, ACP/PTY → process, else auto). */
  backend: BackendKind | null;
  /** Another name `svc agent signal` and cron's `session` accept. */
  profile: string | null;
  /** tmux session name of a mux_hosted agent (default svc-<id>). */
  session: string | null;
  /** {prompt} of the supervised command, and the prompt of a signal without --prompt. */
  prompt: string;
}

const ID = /^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$/;
const KEYS = [
  'id',
  'runtime',
  'command',
  'cwd',
  'env',
  'supervise',
  'nightly_restart',
  'pty',
  'backend',
  'profile',
  'session',
  'prompt',
] as const;

export function parseAgentsDoc(doc: TomlDoc): AgentSpec[] {
  const root = rootReader(doc).onlyKeys(['agent']);
  const specs: AgentSpec[] = [];
  const firstLine = new Map<string, number | undefined>();
  const names = new Map<string, string>(); // id, profile and session names → owning agent id
  for (const t of root.tables('agent')) {
    t.onlyKeys(KEYS);
    const id = t.requiredString('id');
    if (!ID.test(id))
      throw t.error(
        'id',
        `"${id}" is not a valid id: use 1-64 letters, digits, "_" or "-", starting with a letter or digit`,
      );
    if (firstLine.has(id)) {
      const line = firstLine.get(id);
      throw t.error(
        'id',
        `duplicate id "${id}" (first defined${line === undefined ? '' : ` on line ${line}`})`,
      );
    }
    firstLine.set(id, doc.lineOf([...t.path, 'id']));
    const runtimeName = t.requiredString('runtime');
    if (!(RUNTIME_KINDS as readonly string[]).includes(runtimeName)) {
      throw t.error('runtime', `unknown runtime "${runtimeName}" (known: ${RUNTIME_KINDS.join(', ')})`);
    }
    const runtime = runtimeName as RuntimeKind;
    const protocol = RUNTIMES[runtime].protocol;
    const command = t.stringArray('command', { nonEmpty: true }) ?? null;
    if (command) {
      const bad = unknownPlaceholder(command);
      if (bad)
        throw t.error(
          'command',
          `unknown placeholder ${bad} (known: ${PLACEHOLDERS.map((p) => `{${p}}`).join(', ')})`,
        );
    }
    const cwd = t.string('cwd') ?? null;
    if (cwd !== null && !isAbsolute(cwd)) throw t.error('cwd', `must be an absolute path, got "${cwd}"`);
    const pty = t.boolean('pty') ?? false;
    const backend = t.oneOf('backend', BACKEND_KINDS) ?? null;
    if (runtime === 'mux_hosted' && backend !== null && backend !== 'tmux') {
      throw t.error('backend', 'a mux_hosted agent runs in tmux: use backend = "tmux" or leave it out');
    }
    if (runtime !== 'mux_hosted' && backend === 'tmux') {
      throw t.error('backend', 'the tmux backend is for runtime "mux_hosted"');
    }
    if (protocol === 'acp' && backend === 'systemd') {
      throw t.error('backend', 'an ACP agent talks to svcd over its stdio: use backend = "process"');
    }
    if (pty && (protocol === 'acp' || runtime === 'mux_hosted' || backend === 'systemd')) {
      throw t.error(
        'pty',
        protocol === 'acp'
          ? 'an ACP agent uses its stdio for ACP and cannot run in a pseudo-terminal'
          : runtime === 'mux_hosted'
            ? 'a mux_hosted agent already has a terminal (its tmux pane)'
            : 'PTY agents need backend = "process" (svcd holds the terminal)',
      );
    }
    const session = t.string('session') ?? null;
    if (session !== null) {
      if (runtime !== 'mux_hosted') throw t.error('session', 'only mux_hosted agents have a tmux session');
      if (!ID.test(session))
        throw t.error('session', `"${session}" is not a valid tmux session name (letters, digits, "_", "-")`);
    }
    const profile = t.string('profile') ?? null;
    if (profile !== null && !ID.test(profile))
      throw t.error('profile', `"${profile}" is not a valid profile name`);
    for (const [key, name] of [
      ['id', id],
      ['profile', profile],
      ['session', session],
    ] as const) {
      if (name === null) continue;
      const owner = names.get(name);
      if (owner !== undefined && owner !== id) {
        throw t.error(key, `"${name}" is already the id, profile or session of agent "${owner}"`);
      }
      names.set(name, id);
    }
    specs.push({
      id,
      runtime,
      command,
      cwd,
      env: t.stringMap('env') ?? {},
      // One-shot CLI kinds are usually profiles for signals and cron, not long-running units.
      supervise: t.boolean('supervise') ?? protocol !== 'cli',
      nightlyRestart: readTimeOfDay(t, 'nightly_restart'),
      pty,
      backend,
      profile,
      session,
      prompt: t.string('prompt') ?? '',
    });
  }
  return specs;
}

/** Reads agents.toml; a missing file means no agents. */
export async function loadAgentsFile(file: string): Promise<AgentSpec[]> {
  const doc = await readTomlFile(file);
  return doc === 'missing' ? [] : parseAgentsDoc(doc);
}
