// How a log line reads to people. svc's processes log pino JSON lines with the time as epoch
// milliseconds (`time`), which is what machines want; the pretty form puts a readable local
// time first, then the level, the logger and the message, then the other fields as key=value.
// Lines that are not pino JSON (an agent's output, a crash trace) are left as they are.

const LEVELS: Record<number, string> = {
  10: 'TRACE',
  20: 'DEBUG',
  30: 'INFO',
  40: 'WARN',
  50: 'ERROR',
  60: 'FATAL',
};

/** Fields shown in the line's head, not repeated among the key=value fields. */
const HEAD = new Set(['time', 'level', 'msg', 'name', 'component', 'pid', 'hostname', 'err']);

export interface PinoLine {
  time: number;
  level: number;
  msg?: string;
  [field: string]: unknown;
}

/** The line as a pino record, or null when it is not one. */
export function parsePinoLine(line: string): PinoLine | null {
  if (!line.startsWith('{')) return null;
  try {
    const v = JSON.parse(line) as unknown;
    if (typeof v !== 'object' || v === null || Array.isArray(v)) return null;
    const r = v as Record<string, unknown>;
    return typeof r.time === 'number' && typeof r.level === 'number' ? (r as PinoLine) : null;
  } catch {
    return null;
  }
}

const pad = (n: number, w = 2) => String(n).padStart(w, '0');

/** `2026-05-03 17:29:38.123` in local time, or with `utc` in UTC with a `Z`. */
export function formatTime(ms: number, utc = false): string {
  const d = new Date(ms);
  const [y, mo, da, h, mi, s, milli] = utc
    ? [
        d.getUTCFullYear(),
        d.getUTCMonth(),
        d.getUTCDate(),
        d.getUTCHours(),
        d.getUTCMinutes(),
        d.getUTCSeconds(),
        d.getUTCMilliseconds(),
      ]
    : [
        d.getFullYear(),
        d.getMonth(),
        d.getDate(),
        d.getHours(),
        d.getMinutes(),
        d.getSeconds(),
        d.getMilliseconds(),
      ];
  return `${y}-${pad(mo + 1)}-${pad(da)} ${pad(h)}:${pad(mi)}:${pad(s)}.${pad(milli, 3)}${utc ? 'Z' : ''}`;
}

function fieldValue(v: unknown): string {
  if (typeof v === 'string') return /^[^\s"=]+$/.test(v) ? v : JSON.stringify(v);
  if (v === undefined) return 'undefined';
  return JSON.stringify(v);
}

/**
 * A pino line as people read it, e.g.
 * `2026-05-03 17:29:38.123 WARN  svcd supervisor: agent restarted agent_id=ag_1 restarts=2`,
 * an error's stack on the following lines, indented. Any other line comes back unchanged.
 */
export function formatLogLine(line: string, opts: { utc?: boolean } = {}): string {
  const text = line.endsWith('\n') ? line.slice(0, -1) : line;
  const r = parsePinoLine(text);
  if (!r) return text;
  const who = [r.name, r.component].filter((x) => typeof x === 'string' && x !== '').join(' ');
  const level = (LEVELS[r.level] ?? `L${r.level}`).padEnd(5);
  const fields = Object.entries(r)
    .filter(([k]) => !HEAD.has(k))
    .map(([k, v]) => `${k}=${fieldValue(v)}`);
  const err = r.err as { message?: unknown; stack?: unknown } | undefined;
  if (err && typeof err === 'object' && typeof err.message === 'string')
    fields.push(`err=${fieldValue(err.message)}`);
  const head = `${formatTime(r.time, opts.utc)} ${level} ${who ? `${who}: ` : ''}${r.msg ?? ''}`;
  const out = [head, ...fields].join(' ').trimEnd();
  const stack = err && typeof err === 'object' && typeof err.stack === 'string' ? err.stack : '';
  return stack ? `${out}\n${stack.replace(/^/gm, '    ')}` : out;
}
