// `svc completion bash|zsh|fish`: a completion script for every command, subcommand and
// option of this svc, generated from the program itself (src/cli/completion/).
import { Argument, type Command } from 'commander';
import { completionScript, SHELLS, type Shell } from '../completion/scripts.js';
import { commandSpec } from '../completion/spec.js';
import type { CommandDeps } from '../deps.js';
import { VERSION } from '../version.js';

export function registerCompletion(program: Command, deps: CommandDeps): void {
  program
    .command('completion')
    .description('print a shell completion script (bash: source <(svc completion bash))')
    .addArgument(new Argument('<shell>', 'bash, zsh or fish').choices(SHELLS))
    .action((shell: Shell) => {
      const script = completionScript(shell, commandSpec(program), VERSION);
      if (deps.io.write) deps.io.write(script);
      else deps.io.out(script.replace(/\n$/, ''));
    });
}
