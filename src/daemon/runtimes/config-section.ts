// [runtime.<kind>] tables of config.toml: the command template of each runtime kind
// (docs/agents.md, Runtime kinds). Kinds without a table use their reference-agent default.
import { RUNTIME_KINDS, type RuntimeKind } from '../../protocol/runtimes.js';
import type { ConfigSection } from '../config/section.js';
import type { TableReader } from '../config/toml.js';
import { RUNTIMES } from './kinds.js';
import { PLACEHOLDERS, unknownPlaceholder } from './template.js';

export interface RuntimeTemplate {
  /** argv with {prompt}, {task_id}, {workdir} placeholders; "svcd" first means this install. */
  command: string[];
  /** Extra environment for every process of this kind. */
  env: Record<string, string>;
}

export type RuntimeConfig = Record<RuntimeKind, RuntimeTemplate>;

export function parseRuntimeTemplate(t: TableReader): RuntimeTemplate {
  t.onlyKeys(['command', 'env']);
  const command = t.stringArray('command', { nonEmpty: true });
  if (command) {
    if (command[0] === '') throw t.error('command', 'the program (first element) must not be empty');
    const bad = unknownPlaceholder(command);
    if (bad) {
      throw t.error(
        'command',
        `unknown placeholder ${bad} (known: ${PLACEHOLDERS.map((p) => `{${p}}`).join(', ')})`,
      );
    }
  }
  return { command: command ?? [], env: t.stringMap('env') ?? {} };
}

export const runtimeSection: ConfigSection<RuntimeConfig> = {
  parse(table) {
    const out = {} as RuntimeConfig;
    for (const kind of RUNTIME_KINDS) out[kind] = { command: [...RUNTIMES[kind].defaultCommand], env: {} };
    if (!table) return out;
    table.onlyKeys(RUNTIME_KINDS);
    for (const kind of RUNTIME_KINDS) {
      const t = table.subtable(kind);
      if (!t) continue;
      const parsed = parseRuntimeTemplate(t);
      out[kind] = {
        command: parsed.command.length > 0 ? parsed.command : out[kind].command,
        env: parsed.env,
      };
    }
    return out;
  },
};
