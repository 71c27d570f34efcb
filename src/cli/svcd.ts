#!/usr/bin/env node
// svcd: the node daemon. `svcd run` starts it; other subcommands are helpers agents call.
import { Command } from 'commander';
import { registerGetSecret } from './commands/get-secret.js';
import { registerReferenceAgent } from './commands/reference-agent.js';
import { registerSvcdMcp } from './commands/svcd-mcp.js';
import { registerSvcdRun } from './commands/svcd-run.js';
import type { CliIO } from './io.js';
import { processIO, runProgram } from './run.js';
import { VERSION } from './version.js';

export function buildSvcd(io: CliIO): Command {
  const program = new Command('svcd')
    .description('svc node daemon: supervises agents, dispatches cron, runs mesh tasks, brokers secrets')
    .version(VERSION)
    .showHelpAfterError('(run with --help for usage)')
    .exitOverride();
  registerSvcdRun(program, io);
  registerSvcdMcp(program, io);
  registerGetSecret(program, io);
  registerReferenceAgent(program, io);
  for (const c of program.commands) c.exitOverride();
  return program;
}

const io = processIO();
process.exitCode = await runProgram('svcd', () => buildSvcd(io).parseAsync(process.argv), io);
