// Where `svc tower serve` and `svcd run` log, and how: pino JSON lines (time as epoch ms) to
// stderr, or with --log-file to a file rotated by size as agents' output logs are (<file>.1 …
// .N, RotatingLog), or "pretty" for a person at a terminal (readable local times). `svc up`
// and `svc daemon up` start both with --log-file, so their logs no longer grow forever.
import type { Command } from 'commander';
import { DEFAULT_ROTATION, RotatingLog } from '../daemon/process/rotating-log.js';
import type { Logger } from '../lib/log.js';
import { UsageError } from './run.js';

export const LOG_FORMATS = ['json', 'pretty'] as const;
export type LogFormat = (typeof LOG_FORMATS)[number];

/** The smallest --log-max-bytes, as for agents' logs (config.toml log_max_bytes). */
const MIN_LOG_BYTES = 4096;

export interface LogFlags {
  logLevel: string;
  logFile?: string;
  logMaxBytes?: string;
  logKeep?: string;
  logFormat?: string;
}

/** The logging options, shared by `svc tower serve` (and its unit) and `svcd run`. */
export function logOptions(cmd: Command): Command {
  return cmd
    .option('--log-level <level>', 'trace|debug|info|warn|error', 'info')
    .option('--log-file <file>', 'log to this file, rotated by size, instead of stderr')
    .option(
      '--log-max-bytes <n>',
      `with --log-file: rotate when the file would exceed this size (at least ${MIN_LOG_BYTES})`,
      String(DEFAULT_ROTATION.maxBytes),
    )
    .option(
      '--log-keep <n>',
      'with --log-file: rotated files kept (<file>.1 … .N)',
      String(DEFAULT_ROTATION.keep),
    )
    .option(
      '--log-format <format>',
      'json (epoch ms times) or pretty (readable local times); default: pretty on a terminal, else json',
    );
}

function integer(flag: string, text: string, min: number, max: number): number {
  const n = /^\d+$/.test(text.trim()) ? Number(text) : Number.NaN;
  if (!Number.isSafeInteger(n) || n < min || n > max)
    throw new UsageError(`invalid ${flag} "${text}": a whole number from ${min} to ${max}`);
  return n;
}

export interface ProcessLog {
  log: Logger;
  /** Closes the log file (at the process's end). */
  close(): void;
}

/**
 * The process's root logger as the flags say. With a log file, a crash is logged there too
 * (fatal, with its stack) before Node prints it on stderr, which after a rotation is no longer
 * the file `svc logs` reads.
 */
export async function openProcessLog(
  flags: LogFlags,
  o: { name: string; stderrIsTTY: boolean; label?: (long: string) => string },
): Promise<ProcessLog> {
  const label = o.label ?? ((l: string) => l);
  const format = flags.logFormat ?? (o.stderrIsTTY && !flags.logFile ? 'pretty' : 'json');
  if (!(LOG_FORMATS as readonly string[]).includes(format))
    throw new UsageError(`invalid ${label('--log-format')} "${format}": json or pretty`);
  const pretty = format === 'pretty';
  // Loaded here: svc registers these options for every command, and only serve/run log.
  const { createLogger } = await import('../lib/log.js');
  if (!flags.logFile) {
    return { log: createLogger({ level: flags.logLevel, name: o.name, pretty }), close: () => {} };
  }
  const file = new RotatingLog(flags.logFile, {
    maxBytes: integer(
      label('--log-max-bytes'),
      flags.logMaxBytes ?? '',
      MIN_LOG_BYTES,
      Number.MAX_SAFE_INTEGER,
    ),
    keep: integer(label('--log-keep'), flags.logKeep ?? '', 0, 100),
    wholeWrites: true,
  });
  const log = createLogger({
    level: flags.logLevel,
    name: o.name,
    pretty,
    stream: { write: (line: string) => file.write(line) },
  });
  const onCrash = (err: Error, origin: string) => log.fatal({ err, origin }, 'uncaught exception: exiting');
  process.on('uncaughtExceptionMonitor', onCrash);
  return {
    log,
    close: () => {
      process.off('uncaughtExceptionMonitor', onCrash);
      file.close();
    },
  };
}
