// pino loggers. Components take a Logger and make child loggers named for themselves.
// Known secret-bearing fields are redacted at the root so a mistake cannot print them.
import { pino } from 'pino';
import { formatLogLine } from './log-format.js';

export type Logger = pino.Logger;

export interface LogOptions {
  level?: string;
  /** File descriptor or path; default stderr. */
  destination?: number | string;
  /** Where lines go instead of `destination` (e.g. a rotating file); written synchronously. */
  stream?: { write(line: string): void };
  /** Lines for people (log-format.ts: readable local time first) instead of JSON. */
  pretty?: boolean;
  name?: string;
}

export const REDACT_PATHS = [
  'token',
  'jwt',
  'value',
  'secret',
  'password',
  'authorization',
  '*.token',
  '*.jwt',
  '*.value',
  '*.secret',
  '*.password',
  'headers.authorization',
  'req.headers.authorization',
];

export function createLogger(opts: LogOptions = {}): Logger {
  const out = opts.stream ?? pino.destination({ dest: opts.destination ?? 2, sync: true });
  // pino writes one JSON line per call; the pretty form is made from it, so both say the same.
  const dest = opts.pretty ? { write: (line: string) => out.write(`${formatLogLine(line)}\n`) } : out;
  return pino(
    {
      name: opts.name,
      level: opts.level ?? 'info',
      redact: { paths: REDACT_PATHS, censor: '[redacted]' },
      base: undefined,
      // `time` stays pino's epoch milliseconds: `svc logs` and the pretty form make it readable.
    },
    dest,
  );
}

/** A logger that drops everything; for tests and for quiet CLI paths. */
export function silentLogger(): Logger {
  return pino({ level: 'silent' });
}
