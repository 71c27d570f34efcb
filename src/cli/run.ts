// Shared plumbing for the svc and svcd entry points: building the IO, turning errors into
// one-line messages and sysexits codes, and commander's usage errors into exit code 2.
import { CommanderError } from 'commander';
import { EXIT, type ExitCode } from '../lib/exit-codes.js';
import { resolvePaths } from '../lib/home.js';
import { type ErrorCode, isSvcError } from '../protocol/errors.js';
import type { CliIO } from './io.js';

/** Exit status of a process killed by SIGPIPE (128 + 13), what shells report for `git log | head`. */
const EXIT_BROKEN_PIPE = 141;
let pipeWatched = false;

/**
 * When the reader of stdout goes away (`svc feed | head -3`), stop as a Unix tool does on
 * SIGPIPE (which Node ignores), instead of crashing on the unhandled EPIPE with a stack trace
 * or following a stream nobody reads. Other stdout errors keep their default behaviour.
 */
function exitOnBrokenPipe(): void {
  if (pipeWatched) return;
  pipeWatched = true;
  process.stdout.on('error', (e: NodeJS.ErrnoException) => {
    if (e.code === 'EPIPE') process.exit(EXIT_BROKEN_PIPE);
    throw e;
  });
}

export function processIO(): CliIO {
  exitOnBrokenPipe();
  return {
    env: process.env,
    paths: resolvePaths(process.env),
    out: (t) => process.stdout.write(`${t}\n`),
    write: (t) => process.stdout.write(t),
    err: (t) => process.stderr.write(`${t}\n`),
    readStdin: async () => {
      const chunks: Buffer[] = [];
      for await (const c of process.stdin) chunks.push(c as Buffer);
      return Buffer.concat(chunks).toString('utf8');
    },
    stdinIsTTY: () => process.stdin.isTTY === true,
  };
}

const EXIT_BY_CODE: Partial<Record<ErrorCode, ExitCode>> = {
  tower_unreachable: EXIT.unavailable,
  unavailable: EXIT.unavailable,
  storage_full: EXIT.unavailable,
  storage_read_only: EXIT.unavailable,
  storage_busy: EXIT.unavailable,
  storage_io_error: EXIT.unavailable,
  node_offline: EXIT.unavailable,
  config_invalid: EXIT.config,
};

/** A usage error detected by a command itself (bad flag combination): exit code 2. */
export class UsageError extends Error {}

/** Ends a command with this exit code and no message (an agent's own exit status). */
export class ExitStatus extends Error {
  constructor(readonly code: number) {
    super(`exit status ${code}`);
  }
}

export function exitCodeFor(e: unknown): ExitCode {
  if (e instanceof UsageError) return EXIT.usage;
  if (isSvcError(e)) return EXIT_BY_CODE[e.code] ?? EXIT.failed;
  return EXIT.software;
}

/** Runs a commander program; returns the exit code instead of exiting (tests call this). */
export async function runProgram(
  name: string,
  parse: () => Promise<unknown>,
  io: Pick<CliIO, 'err'>,
): Promise<number> {
  try {
    await parse();
    return EXIT.ok;
  } catch (e) {
    if (e instanceof ExitStatus) return e.code as ExitCode;
    if (e instanceof CommanderError) {
      if (e.code === 'commander.helpDisplayed' || e.code === 'commander.version' || e.exitCode === 0)
        return EXIT.ok;
      return EXIT.usage; // commander already printed the message
    }
    const msg = e instanceof Error ? e.message : String(e);
    const code = isSvcError(e) ? ` [${e.code}]` : '';
    io.err(`${name}: error: ${msg}${code}`);
    if (!isSvcError(e) && !(e instanceof UsageError) && e instanceof Error && e.stack) io.err(e.stack);
    return exitCodeFor(e);
  }
}
