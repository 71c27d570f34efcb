// Shared plumbing for the svc and svcd entry points: building the IO, turning errors into
// one-line messages and sysexits codes, and commander's usage errors into exit code 2.
import { CommanderError } from 'commander';
import { EXIT, type ExitCode } from '../lib/exit-codes.js';
import { resolvePaths } from '../lib/home.js';
import { type ErrorCode, type FieldError, isSvcError } from '../protocol/errors.js';
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
    stderrIsTTY: () => process.stderr.isTTY === true,
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

/**
 * `--json` anywhere before a `--`: errors are then printed as JSON too. Decided from argv, not
 * from commander, because a usage error can stop parsing before the flag is read.
 */
export function wantsJson(args: readonly string[]): boolean {
  for (const a of args) {
    if (a === '--') return false;
    if (a === '--json') return true;
  }
  return false;
}

/**
 * What `--json` prints on stderr for a failed command (docs/errors.md, "In the CLI"): one line,
 * `{"error": {code, message, exit_code, …}}`. `usage` is the CLI's own code (exit 2);
 * `internal` is a bug (exit 70); every other code is the SvcError's, with its HTTP status.
 */
export interface CliErrorReport {
  error: {
    code: ErrorCode | 'usage';
    message: string;
    exit_code: number;
    status?: number;
    errors?: FieldError[];
    retry_after?: number;
    /** internal only: where the bug is. */
    stack?: string;
  };
}

export function errorReport(e: unknown): CliErrorReport {
  if (e instanceof CommanderError) {
    return {
      error: { code: 'usage', message: commanderMessage(e), exit_code: commanderExitCode(e) },
    };
  }
  const exit_code = exitCodeFor(e);
  if (e instanceof UsageError) return { error: { code: 'usage', message: e.message, exit_code } };
  if (isSvcError(e)) {
    return {
      error: {
        code: e.code,
        message: e.message,
        exit_code,
        status: e.status,
        ...(e.errors ? { errors: e.errors } : {}),
        ...(e.retryAfter !== undefined ? { retry_after: e.retryAfter } : {}),
      },
    };
  }
  const stack = e instanceof Error && e.stack ? { stack: e.stack } : {};
  return {
    error: { code: 'internal', message: e instanceof Error ? e.message : String(e), exit_code, ...stack },
  };
}

/** commander's message without its "error: " prefix; its help-instead-of-a-command case named. */
function commanderMessage(e: CommanderError): string {
  if (e.code === 'commander.help') return 'a subcommand is required (run with --help for the list)';
  return e.message.replace(/^error: /, '');
}

function commanderExitCode(e: CommanderError): ExitCode {
  if (e.code === 'commander.helpDisplayed' || e.code === 'commander.version' || e.exitCode === 0)
    return EXIT.ok;
  return EXIT.usage;
}

/**
 * Runs a commander program; returns the exit code instead of exiting (tests call this).
 * With `json`, a failure is printed as one JSON object (errorReport) instead of a line of
 * text, and commander must have been told to print nothing itself (buildSvc does).
 */
export async function runProgram(
  name: string,
  parse: () => Promise<unknown>,
  io: Pick<CliIO, 'err'>,
  opts: { json?: boolean } = {},
): Promise<number> {
  try {
    await parse();
    return EXIT.ok;
  } catch (e) {
    if (e instanceof ExitStatus) return e.code as ExitCode;
    if (opts.json) {
      const report = errorReport(e);
      if (report.error.exit_code !== EXIT.ok) io.err(JSON.stringify(report));
      return report.error.exit_code;
    }
    // commander already printed its message
    if (e instanceof CommanderError) return commanderExitCode(e);
    const msg = e instanceof Error ? e.message : String(e);
    const code = isSvcError(e) ? ` [${e.code}]` : '';
    io.err(`${name}: error: ${msg}${code}`);
    if (!isSvcError(e) && !(e instanceof UsageError) && e instanceof Error && e.stack) io.err(e.stack);
    return exitCodeFor(e);
  }
}
