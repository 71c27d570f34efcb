// Command templates (config.toml [runtime.<kind>] command = [...]): placeholders are
// replaced inside single argv elements, never through a shell, so a prompt with quotes,
// `;` or newlines reaches the agent as exactly one argument.
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

export const PLACEHOLDERS = ['prompt', 'task_id', 'workdir'] as const;
export type Placeholder = (typeof PLACEHOLDERS)[number];
export type TemplateVars = Record<Placeholder, string>;

const TOKEN = /\{([a-z_]+)\}/g;

/** The first unknown {placeholder} in a template, or null. Catches typos like {promt}. */
export function unknownPlaceholder(argv: readonly string[]): string | null {
  for (const arg of argv) {
    for (const m of arg.matchAll(TOKEN)) {
      if (!(PLACEHOLDERS as readonly string[]).includes(m[1] ?? '')) return m[0];
    }
  }
  return null;
}

export interface RenderedCommand {
  argv: string[];
  /** False when no argument contains {prompt}: the prompt then goes to the agent's stdin. */
  promptInArgs: boolean;
}

export function renderCommand(template: readonly string[], vars: TemplateVars): RenderedCommand {
  let promptInArgs = false;
  const argv = template.map((arg) =>
    arg.replace(TOKEN, (whole, name: string) => {
      if (name === 'prompt') promptInArgs = true;
      return (PLACEHOLDERS as readonly string[]).includes(name) ? vars[name as Placeholder] : whole;
    }),
  );
  return { argv, promptInArgs };
}

/**
 * How this package runs its own `svcd` binary: templates that start with "svcd" (the
 * reference agents) run the svcd of this very install, whatever PATH says.
 */
export function selfCommand(): string[] {
  const built = fileURLToPath(new URL('../../cli/svcd.js', import.meta.url));
  if (existsSync(built)) return [process.execPath, built];
  // Running from src/ (unit tests): use the build next to it (npm test builds first).
  return [process.execPath, built.replace(/([/\\])src([/\\])cli([/\\])svcd\.js$/, '$1dist$2cli$3svcd.js')];
}

/** Replaces a leading "svcd" with this install's svcd. */
export function resolveSelf(argv: readonly string[], self: readonly string[]): string[] {
  return argv[0] === 'svcd' ? [...self, ...argv.slice(1)] : [...argv];
}
