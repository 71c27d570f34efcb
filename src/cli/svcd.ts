#!/usr/bin/env node
// svcd: the node daemon. `svcd run` starts it; other subcommands are helpers agents call.
import { Command } from 'commander';
import { processIO, runProgram } from './run.js';
import { VERSION } from './version.js';

const io = processIO();
const program = new Command('svcd')
  .description('svc node daemon: supervises agents, dispatches cron, runs mesh tasks, brokers secrets')
  .version(VERSION)
  .exitOverride();

process.exitCode = await runProgram('svcd', () => program.parseAsync(process.argv), io);
