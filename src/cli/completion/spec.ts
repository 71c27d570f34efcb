// The command tree shell completion needs, read from the commander program itself: every
// visible command, alias, option and argument choice, so a new command completes with no edit
// here. Renderers (bash.ts, zsh.ts, fish.ts) turn it into scripts; nothing here knows a shell.
import { type Argument, type Command, Help, type Option } from 'commander';

export interface OptionSpec {
  /** `--long` and/or `-s`, long first. */
  names: string[];
  description: string;
  /** The option takes a value (`--url <url>`): the next word is that value, not a command. */
  takesValue: boolean;
  /** Values to offer for it (commander `.choices()`), else none (the shell offers files). */
  choices: string[];
}

export interface CommandSpec {
  name: string;
  aliases: string[];
  description: string;
  /** Names from the root, e.g. ['svc', 'agent', 'cron']: the key the renderers switch on. */
  path: string[];
  options: OptionSpec[];
  commands: CommandSpec[];
  /** Words offered for positional arguments (argument choices, or completeWith hints). */
  argValues: string[];
}

const argHints = new WeakMap<Argument, readonly string[]>();

/**
 * Words to offer for a free-form argument (one whose value is not limited to them, e.g.
 * `svc logs [source]`: tower, svcd or any agent id).
 */
export function completeWith(arg: Argument, words: readonly string[]): Argument {
  argHints.set(arg, words);
  return arg;
}

function optionSpec(o: Option): OptionSpec {
  return {
    names: [o.long, o.short].filter((n): n is string => typeof n === 'string'),
    description: o.description,
    takesValue: o.required || o.optional,
    choices: o.argChoices ? [...o.argChoices] : [],
  };
}

/**
 * The spec of `cmd` and everything under it. `inherited` are the root's options, which
 * commander accepts after any subcommand too (`svc domain list --json`).
 */
export function commandSpec(
  cmd: Command,
  path: string[] = [cmd.name()],
  inherited: OptionSpec[] = [],
): CommandSpec {
  const help = new Help();
  const own = help
    .visibleOptions(cmd)
    .map(optionSpec)
    // Root options other than --help/--version apply to every subcommand.
    .filter((o) => !inherited.some((i) => i.names[0] === o.names[0]));
  const options = [...own, ...inherited];
  const forChildren =
    path.length === 1 ? own.filter((o) => !['--help', '--version'].includes(o.names[0] ?? '')) : inherited;
  const visible = help.visibleCommands(cmd);
  const commands = visible.map((c) => {
    const spec = commandSpec(c, [...path, c.name()], forChildren);
    // commander's implicit `help [command]` is not in the tree: it takes a sibling's name.
    if (cmd.commands.includes(c)) return spec;
    return { ...spec, argValues: visible.filter((v) => v !== c).map((v) => v.name()) };
  });
  const argValues = cmd.registeredArguments.flatMap((a) => a.argChoices ?? argHints.get(a) ?? []);
  return {
    name: cmd.name(),
    aliases: cmd.aliases(),
    description: cmd.description(),
    path,
    options,
    commands,
    argValues: [...new Set(argValues)],
  };
}

/** Every command of the tree, root first, depth first. */
export function allCommands(spec: CommandSpec): CommandSpec[] {
  return [spec, ...spec.commands.flatMap(allCommands)];
}
