#!/usr/bin/env node
// svc: the operator CLI. Each command is a thin call of the tower's HTTP API or of svcd's
// mgmt.sock; program.ts assembles them, this file runs them.
import { buildSvc } from './program.js';
import { processIO, runProgram, wantsJson } from './run.js';

const io = processIO();
const json = wantsJson(process.argv.slice(2));
process.exitCode = await runProgram('svc', () => buildSvc(io, { json }).parseAsync(process.argv), io, {
  json,
});
