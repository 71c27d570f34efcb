// cron.toml, parsed in this one place into a typed, validated CronConfig (docs/cron.md).
// Every error names the file, the line, the job and the field. Nothing else
// in svcd sees raw TOML.
import { readFile } from 'node:fs/promises';
import { parse, TomlError } from 'smol-toml';
import { ceilToMinutes, formatDuration, parseDuration } from '../../lib/duration.js';
import type { FieldError } from '../../protocol/errors.js';
import { SvcError } from '../../protocol/errors.js';
import { locateLines } from './lines.js';
import { checkTimezone, cronSchedule, heartbeatSchedule, type Schedule } from './schedule.js';

/** Bash jobs without a timeout of their own or a global one are killed after this. */
export const DEFAULT_BASH_TIMEOUT_MS = 10 * 60_000;

export type Dispatch = 'signal' | 'bash';
export type CatchUp = 'none' | 'latest';

export interface CronJob {
  name: string;
  /** Line of the job's [[job]] header (1-based). */
  line: number;
  schedule: Schedule;
  /** As written in cron.toml: the expression, or the interval of a heartbeat. */
  scheduleText: string | null;
  intervalText: string | null;
  session: string | null;
  prompt: string;
  dispatch: Dispatch;
  enabled: boolean;
  catchUp: CatchUp;
  /** bash only: the effective timeout; null for signal jobs. */
  timeoutMs: number | null;
}

export interface CronConfig {
  file: string;
  /** The configured IANA zone; null means the host's local time. */
  timezone: string | null;
  jobs: CronJob[];
}

const TOP_FIELDS = new Set(['timezone', 'timeout', 'job']);
const JOB_FIELDS = new Set([
  'name',
  'schedule',
  'kind',
  'interval',
  'session',
  'prompt',
  'dispatch',
  'enabled',
  'timeout',
  'catch_up',
]);

interface Problem {
  line: number;
  /** Path of the field: "timezone", "job[2].schedule". */
  field: string;
  /** Prefix naming the job, e.g. `job "backup"`. */
  job?: string;
  message: string;
}

/** Reads and parses cron.toml; a missing file is an empty config (no jobs). */
export async function loadCronConfig(file: string): Promise<CronConfig> {
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return { file, timezone: null, jobs: [] };
    throw new SvcError('config_invalid', `${file}: cannot read: ${(e as Error).message}`);
  }
  return parseCronConfig(text, file);
}

/** Parses cron.toml text; throws SvcError config_invalid listing every problem found. */
export function parseCronConfig(text: string, file: string): CronConfig {
  let doc: Record<string, unknown>;
  try {
    doc = parse(text) as Record<string, unknown>;
  } catch (e) {
    if (e instanceof TomlError) {
      const reason = e.message.split('\n')[0]?.replace(/^Invalid TOML document: /, '') ?? e.message;
      throw configError(file, [
        { line: e.line, field: '(syntax)', message: `${reason} (column ${e.column})` },
      ]);
    }
    throw e;
  }
  const lines = locateLines(text);
  const problems: Problem[] = [];

  for (const key of Object.keys(doc)) {
    if (!TOP_FIELDS.has(key)) {
      problems.push({
        line: lines.top.get(key) ?? 1,
        field: key,
        message: `unknown field; cron.toml has "timezone", "timeout" and [[job]] tables`,
      });
    }
  }

  let timezone: string | null = null;
  if (doc.timezone !== undefined) {
    const line = lines.top.get('timezone') ?? 1;
    if (typeof doc.timezone !== 'string') {
      problems.push({ line, field: 'timezone', message: 'must be a string such as "Europe/Berlin"' });
    } else {
      try {
        checkTimezone(doc.timezone);
        timezone = doc.timezone;
      } catch (e) {
        problems.push({ line, field: 'timezone', message: (e as Error).message });
      }
    }
  }

  let defaultTimeout = DEFAULT_BASH_TIMEOUT_MS;
  if (doc.timeout !== undefined) {
    const t = durationField(doc.timeout);
    if (typeof t === 'string')
      problems.push({ line: lines.top.get('timeout') ?? 1, field: 'timeout', message: t });
    else defaultTimeout = t;
  }

  const rawJobs = doc.job === undefined ? [] : doc.job;
  if (!Array.isArray(rawJobs)) {
    problems.push({
      line: lines.top.get('job') ?? 1,
      field: 'job',
      message: 'jobs are [[job]] tables (an array of tables)',
    });
    throw configError(file, problems);
  }

  const jobs: CronJob[] = [];
  const seen = new Map<string, number>();
  rawJobs.forEach((raw: unknown, i) => {
    const at = lines.jobs[i];
    const headerLine = at?.line ?? lines.top.get('job') ?? 1;
    const lineOf = (field: string) => at?.fields.get(field) ?? headerLine;
    const path = (field: string) => `job[${i}].${field}`;
    if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) {
      problems.push({ line: headerLine, field: `job[${i}]`, message: 'must be a table' });
      return;
    }
    const r = raw as Record<string, unknown>;
    const label = typeof r.name === 'string' && r.name !== '' ? `job "${r.name}"` : `job #${i + 1}`;
    const before = problems.length;
    const bad = (field: string, message: string) =>
      problems.push({ line: lineOf(field), field: path(field), job: label, message });

    for (const key of Object.keys(r)) {
      if (!JOB_FIELDS.has(key)) bad(key, `unknown field; a job has ${[...JOB_FIELDS].join(', ')}`);
    }

    const name = stringField(r, 'name', bad, { required: true });
    if (name !== undefined) {
      if (name.length > 200 || /\p{Cc}/u.test(name)) {
        bad('name', 'must be at most 200 characters, without control characters');
      } else if (seen.has(name)) {
        bad('name', `duplicate name; the first "${name}" is on line ${seen.get(name)}`);
      } else {
        seen.set(name, headerLine);
      }
    }

    const kind = stringField(r, 'kind', bad);
    if (kind !== undefined && kind !== 'heartbeat') {
      bad('kind', `unknown kind "${kind}": the only kind is "heartbeat" (omit kind for scheduled jobs)`);
    }
    const scheduleText = stringField(r, 'schedule', bad);
    const intervalText = stringField(r, 'interval', bad);
    let schedule: Schedule | undefined;
    if (kind === 'heartbeat') {
      if (scheduleText !== undefined) {
        bad('schedule', 'a heartbeat job has an interval, not a schedule: remove one of them');
      }
      if (intervalText === undefined) {
        if (!('interval' in r))
          bad('interval', 'missing: a heartbeat job needs interval = "<N>s|m|h|d", e.g. "30m"');
      } else {
        try {
          schedule = heartbeatSchedule(ceilToMinutes(parseDuration(intervalText, { allowMs: false })));
        } catch (e) {
          bad('interval', (e as Error).message);
        }
      }
    } else if (kind === undefined) {
      if (intervalText !== undefined) {
        bad(
          'interval',
          scheduleText !== undefined
            ? 'both schedule and interval given: a job has one of them'
            : 'interval is for heartbeat jobs: add kind = "heartbeat", or use a schedule',
        );
      } else if (scheduleText === undefined) {
        if (!('schedule' in r)) {
          bad(
            'schedule',
            'missing: give schedule = "<5-field cron expression>", or kind = "heartbeat" + interval',
          );
        }
      } else {
        try {
          schedule = cronSchedule(scheduleText, timezone ?? undefined);
        } catch (e) {
          bad('schedule', `invalid cron expression: ${cronReason(e)}`);
        }
      }
    }

    const dispatchText = stringField(r, 'dispatch', bad);
    let dispatch: Dispatch = 'signal';
    let dispatchKnown = true;
    if (dispatchText !== undefined) {
      if (dispatchText === 'signal' || dispatchText === 'bash') dispatch = dispatchText;
      else {
        dispatchKnown = false;
        bad('dispatch', `unknown dispatch "${dispatchText}": use "signal" (default) or "bash"`);
      }
    }

    const session = stringField(r, 'session', bad);
    if (dispatchKnown && dispatch === 'signal' && session === undefined && !('session' in r)) {
      bad('session', 'missing: a signal job names the agent (profile or mux session) to signal');
    }
    const prompt = stringField(r, 'prompt', bad, { required: true });

    let enabled = true;
    if (r.enabled !== undefined) {
      if (typeof r.enabled === 'boolean') enabled = r.enabled;
      else bad('enabled', 'must be true or false');
    }

    const catchUpText = stringField(r, 'catch_up', bad);
    let catchUp: CatchUp = 'none';
    if (catchUpText !== undefined) {
      if (catchUpText === 'none' || catchUpText === 'latest') catchUp = catchUpText;
      else bad('catch_up', `unknown value "${catchUpText}": use "none" (default) or "latest"`);
    }

    let timeoutMs: number | null = dispatch === 'bash' ? defaultTimeout : null;
    if (r.timeout !== undefined) {
      if (dispatch !== 'bash') {
        bad('timeout', 'only bash jobs have a timeout: remove it or set dispatch = "bash"');
      } else {
        const t = durationField(r.timeout);
        if (typeof t === 'string') bad('timeout', t);
        else timeoutMs = t;
      }
    }

    if (problems.length > before || name === undefined || schedule === undefined || prompt === undefined)
      return;
    jobs.push({
      name,
      line: headerLine,
      schedule,
      scheduleText: schedule.kind === 'schedule' ? (scheduleText ?? null) : null,
      intervalText: schedule.kind === 'heartbeat' ? (intervalText ?? null) : null,
      session: session ?? null,
      prompt,
      dispatch,
      enabled,
      catchUp,
      timeoutMs,
    });
  });

  if (problems.length > 0) throw configError(file, problems);
  return { file, timezone, jobs };
}

/** A fingerprint of what a job does, to tell changed jobs apart on reload. */
export function jobFingerprint(j: CronJob): string {
  return JSON.stringify([
    j.scheduleText,
    j.intervalText,
    j.schedule.kind === 'heartbeat' ? j.schedule.intervalMs : j.schedule.timezone,
    j.session,
    j.prompt,
    j.dispatch,
    j.enabled,
    j.catchUp,
    j.timeoutMs,
  ]);
}

function stringField(
  r: Record<string, unknown>,
  field: string,
  bad: (field: string, message: string) => void,
  opts: { required?: boolean } = {},
): string | undefined {
  const v = r[field];
  if (v === undefined) {
    if (opts.required) bad(field, 'missing');
    return undefined;
  }
  if (typeof v !== 'string') {
    bad(field, `must be a string, not ${describe(v)}`);
    return undefined;
  }
  if (v.trim() === '') {
    bad(field, 'must not be empty');
    return undefined;
  }
  return v;
}

/** A positive duration string, or the message saying what is wrong with it. */
function durationField(v: unknown): number | string {
  if (typeof v !== 'string') return `must be a duration string such as "10m", not ${describe(v)}`;
  try {
    return parseDuration(v, { allowMs: false });
  } catch (e) {
    return (e as Error).message;
  }
}

function describe(v: unknown): string {
  if (Array.isArray(v)) return 'an array';
  if (v instanceof Date) return 'a date';
  if (typeof v === 'object' && v !== null) return 'a table';
  return `${typeof v} ${JSON.stringify(v)}`;
}

function cronReason(e: unknown): string {
  return ((e as Error).message ?? String(e)).replace(/^CronPattern: /, '');
}

function configError(file: string, problems: Problem[]): SvcError {
  const sorted = [...problems].sort((a, b) => a.line - b.line);
  const text = sorted.map((p) => `${file}:${p.line}: ${p.job ? `${p.job}: ` : ''}${p.field}: ${p.message}`);
  const errors: FieldError[] = sorted.map((p) => ({
    field: p.field,
    message: `${file}:${p.line}: ${p.job ? `${p.job}: ` : ''}${p.message}`,
  }));
  const head = sorted.length === 1 ? 'cron.toml is invalid' : `cron.toml has ${sorted.length} errors`;
  return new SvcError('config_invalid', `${head}: ${text.join('; ')}`, { errors });
}

/** "90s" → "2m (rounded up from 90s)": how describe shows a heartbeat interval. */
export function describeInterval(text: string, ms: number): string {
  const shown = formatDuration(ms);
  return shown === text ? shown : `${shown} (rounded up from ${text})`;
}
