// `svcd reference-agent`: the deterministic agents shipped for tests and `svc up`
// (src/daemon/runtimes/reference-agent.ts), and `svcd log-pipe`, the bounded log writer
// that tmux pipes a mux_hosted pane's output into.
import type { Command } from 'commander';
import { RotatingLog } from '../../daemon/process/rotating-log.js';
import type { CliIO } from '../io.js';
import { ExitStatus, UsageError } from '../run.js';
import { VERSION } from '../version.js';

export function registerReferenceAgent(program: Command, io: CliIO): void {
  program
    .command('reference-agent')
    .description(
      'a deterministic agent for tests (no network): echoes, "run: CMD", "fail: WHY", "sleep: N", "progress: N", "exit: N"',
    )
    .argument('[prompt...]', 'the prompt (one-shot mode); without it the prompt is read from stdin')
    .option('--acp', 'speak ACP over stdio (runtime alpha_agent_acp)')
    .option('--interactive', 'read one prompt per line until EOF (runtime mux_hosted, PTY agents)')
    .action(async (words: string[], o: { acp?: boolean; interactive?: boolean }) => {
      if (o.acp && o.interactive) throw new UsageError('choose one of --acp and --interactive');
      const rio = {
        env: io.env,
        cwd: process.cwd(),
        stdin: process.stdin,
        stdout: process.stdout,
        stderr: process.stderr,
      };
      // Loaded in the action: `svcd run` parses the same program and never needs them.
      const { runInteractive, runOneShot } = await import('../../daemon/runtimes/reference-agent.js');
      let code: number;
      if (o.acp) {
        // Loaded on demand: the ACP SDK costs a noticeable part of a one-shot run's start.
        const { runAcpAgent } = await import('../../daemon/runtimes/reference-agent-acp.js');
        code = await runAcpAgent(rio, VERSION);
      } else if (o.interactive) code = await runInteractive(rio);
      else code = await runOneShot(words.length > 0 ? words.join(' ') : await io.readStdin(), rio);
      if (code !== 0) throw new ExitStatus(code);
    });

  program
    .command('log-pipe', { hidden: true })
    .description('append stdin to a size-rotated log file (used by tmux pipe-pane)')
    .argument('<file>', 'log file')
    .option('--max-bytes <n>', 'rotate at this size', (v) => Number.parseInt(v, 10), 10 * 1024 * 1024)
    .option('--keep <n>', 'rotated files kept', (v) => Number.parseInt(v, 10), 3)
    .action(async (file: string, o: { maxBytes: number; keep: number }) => {
      const log = new RotatingLog(file, { maxBytes: o.maxBytes, keep: o.keep });
      for await (const chunk of process.stdin) log.write(chunk as Buffer);
      log.close();
    });
}
