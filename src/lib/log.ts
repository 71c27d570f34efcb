// pino loggers. Components take a Logger and make child loggers named for themselves.
// Known secret-bearing fields are redacted at the root so a mistake cannot print them.
import { pino } from 'pino';

export type Logger = pino.Logger;

export interface LogOptions {
  level?: string;
  /** File descriptor or path; default stderr. */
  destination?: number | string;
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
  const dest = pino.destination({ dest: opts.destination ?? 2, sync: true });
  return pino(
    {
      name: opts.name,
      level: opts.level ?? 'info',
      redact: { paths: REDACT_PATHS, censor: '[redacted]' },
      base: undefined,
    },
    dest,
  );
}

/** A logger that drops everything; for tests and for quiet CLI paths. */
export function silentLogger(): Logger {
  return pino({ level: 'silent' });
}
