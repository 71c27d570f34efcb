#!/usr/bin/env node
// svc: the operator CLI. Each command is a thin call of the tower's HTTP API or of svcd's
// mgmt.sock; this file only assembles them.
import { Command } from 'commander';
import { registerAgentSupervise } from './commands/agent-supervise.js';
import { registerAttach } from './commands/attach.js';
import { registerCronCommands } from './commands/cron.js';
import { registerDaemonCommands } from './commands/daemon.js';
import { registerDaemonEvents } from './commands/daemon-events.js';
import { registerFeed } from './commands/feed.js';
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
import { processIO, runProgram } from './run.js';
import { VERSION } from './version.js';

export function buildSvc(io: CliIO): Command {
  const program = new Command('svc')
    .description('operate svc: the tower, node daemons (svcd), agents, tasks and the event feed')
    .version(VERSION)
    .option('--url <url>', 'tower base URL (default: SVC_BASE_URL, credentials.json, http://127.0.0.1:8008)')
    .option('--token <token>', 'credential (default: SVC_TOKEN, credentials.json, local admin token)')
    .option('--json', 'print machine-readable JSON')
    .showHelpAfterError('(run with --help for usage)')
    .exitOverride();
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

  exitOverrideAll(program);
  return program;
}

/** Usage errors anywhere in the tree exit with code 2 instead of commander's process.exit. */
function exitOverrideAll(cmd: Command): void {
  cmd.exitOverride();
  for (const c of cmd.commands) exitOverrideAll(c);
}

const io = processIO();
const code = await runProgram('svc', () => buildSvc(io).parseAsync(process.argv), io);
process.exitCode = code;
