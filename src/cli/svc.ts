#!/usr/bin/env node
// svc: the operator CLI. Each command is a thin call of the tower's HTTP API or of svcd's
// mgmt.sock; this file only assembles them.
import { Command } from 'commander';
import { registerRecords } from './commands/records.js';
import { registerToken } from './commands/token.js';
import { registerTower } from './commands/tower.js';
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
  // Subcommands inherit exitOverride and output settings.
  for (const c of program.commands) c.exitOverride();
  return program;
}

const io = processIO();
const code = await runProgram('svc', () => buildSvc(io).parseAsync(process.argv), io);
process.exitCode = code;
