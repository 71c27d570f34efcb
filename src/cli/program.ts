// The svc program: every command, subcommand and option of the operator CLI, assembled from
// the command modules. Built without running it, so `svc completion` and tests can walk it.
import { Command } from 'commander';
import { registerAgentSupervise } from './commands/agent-supervise.js';
import { registerAttach } from './commands/attach.js';
import { registerCompletion } from './commands/completion.js';
import { registerCronCommands } from './commands/cron.js';
import { registerDaemonCommands } from './commands/daemon.js';
import { registerDaemonEvents } from './commands/daemon-events.js';
import { registerFeed } from './commands/feed.js';
import { registerLogs } from './commands/logs.js';
import { registerNodeCommands } from './commands/node.js';
import { registerRecords } from './commands/records.js';
import { registerSecret } from './commands/secret.js';
import { registerSystem } from './commands/system.js';
import { registerTasks } from './commands/task.js';
import { registerToken } from './commands/token.js';
import { registerTower } from './commands/tower.js';
import { registerUp } from './commands/up.js';
import { registerWorker } from './commands/worker.js';
import { makeDeps } from './deps.js';
import type { CliIO } from './io.js';
import { VERSION } from './version.js';

export function buildSvc(io: CliIO, opts: { json?: boolean } = {}): Command {
  const program = new Command('svc')
    .description('operate svc: the tower, node daemons (svcd), agents, tasks and the event feed')
    .version(VERSION)
    .option('--url <url>', 'tower base URL (default: SVC_BASE_URL, credentials.json, http://127.0.0.1:8008)')
    .option('--token <token>', 'credential (default: SVC_TOKEN, credentials.json, local admin token)')
    .option('--json', 'print machine-readable JSON')
    .showHelpAfterError(opts.json ? false : '(run with --help for usage)')
    .exitOverride();
  // Commander writes through io like every command. With --json, runProgram prints the one
  // JSON error and commander's text must not precede it.
  const writeOut = (s: string) => (io.write ? io.write(s) : io.out(s.replace(/\n$/, '')));
  const writeErr = (s: string) => io.err(s.replace(/\n$/, ''));
  program.configureOutput(
    opts.json ? { writeOut, writeErr: () => {}, outputError: () => {} } : { writeOut, writeErr },
  );
  const deps = makeDeps(io);
  registerTower(program, deps);
  registerToken(program, deps);
  registerRecords(program, deps);
  registerSecret(program, deps);
  registerAttach(program, deps);
  registerFeed(program, deps);
  registerUp(program, deps);

  // Command groups several areas add to.
  const agent = program
    .command('agent')
    .description('this node: registration, supervised agents, signals, cron');
  registerNodeCommands(agent, deps);
  registerAgentSupervise(agent, deps);
  registerCronCommands(agent, deps);
  registerTasks(program, agent, deps);
  const daemon = program.command('daemon').description('the local node daemon (svcd)');
  registerDaemonCommands(daemon, deps);
  registerDaemonEvents(daemon, deps);
  registerWorker(program, daemon, deps);
  registerSystem(program, deps);
  registerLogs(program, deps);
  registerCompletion(program, deps);

  exitOverrideAll(program);
  return program;
}

/** Usage errors anywhere in the tree exit with code 2 instead of commander's process.exit. */
function exitOverrideAll(cmd: Command): void {
  cmd.exitOverride();
  for (const c of cmd.commands) exitOverrideAll(c);
}
