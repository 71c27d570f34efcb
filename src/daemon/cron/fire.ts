// One fire of a cron job: the history entry a decision becomes (with the detail an operator
// reads), carrying it out (a signal to the supervisor, or bash with a timeout), its outcome
// and its cron.fire event. No timers, no SQL: cron.ts sequences, store.ts records.
import type { Clock } from '../../lib/clock.js';
import { iso } from '../../lib/clock.js';
import type { CronFireEventPayload } from '../../protocol/cron.js';
import { isSvcError } from '../../protocol/errors.js';
import { runBash } from './bash.js';
import type { CronJob } from './config.js';
import type { Decision } from './due-jobs.js';
import type * as store from './store.js';

export interface Entry extends store.NewEntry {
  decision: Decision;
}

/** How a fire ended, before it is timed and recorded. */
export interface FireResult {
  outcome: store.Finish['outcome'];
  exitCode: number | null;
  outputTail: string | null;
  detail: string | null;
}

export interface FireDeps {
  /** `svc agent signal` to an agent id or profile (the supervisor's). */
  signal: (target: string, prompt: string) => Promise<unknown>;
  clock: Clock;
  /** svcd's environment, the base of bash jobs' (with SVC_CRON_JOB and the minute added). */
  env: NodeJS.ProcessEnv;
  /** Where bash jobs run when HOME is unset: $SVC_HOME. */
  home: string;
}

/**
 * The history entry of a decision made at `now`. `runningSince` is the minute of the fire of
 * the same job still running, for the detail of an overlap skip.
 */
export function entryOf(d: Decision, now: number, runningSince: number | null): Entry {
  const base = { decision: d, job: d.job.name, scheduledMinute: d.minute, dispatch: d.job.dispatch };
  if (d.action === 'fire') {
    return {
      ...base,
      outcome: 'running',
      reason: null,
      catchUp: d.missed !== null,
      startedAt: now,
      detail: d.missed
        ? `catch-up (catch_up = "latest") of the most recent minute missed while svcd was down (${missedText(d.missed)})`
        : null,
    };
  }
  let detail: string;
  if (d.reason === 'disabled') detail = 'the job is disabled (enabled = false)';
  else if (d.reason === 'overlap') {
    detail = `the fire of ${runningSince !== null ? iso(runningSince) : 'an earlier minute'} is still running`;
  } else {
    detail = `missed while svcd was down (${d.missed ? missedText(d.missed) : 'one minute'}); not caught up`;
    if (d.job.catchUp === 'latest') {
      detail += d.job.enabled
        ? ' because the job is due in this minute anyway'
        : ' because the job is disabled';
    }
  }
  return { ...base, outcome: 'skipped', reason: d.reason, catchUp: false, startedAt: null, detail };
}

/** Carries the fire out; `signal` aborted = svcd stopping (a bash job is killed). */
export async function dispatchFire(
  job: CronJob,
  entry: Entry,
  signal: AbortSignal,
  deps: FireDeps,
): Promise<FireResult> {
  if (job.dispatch === 'signal') {
    try {
      await deps.signal(job.session ?? '', job.prompt);
      return { outcome: 'ok', exitCode: null, outputTail: null, detail: null };
    } catch (e) {
      const code = isSvcError(e) ? ` [${e.code}]` : '';
      return {
        outcome: 'failed',
        exitCode: null,
        outputTail: null,
        detail: `signal to "${job.session}" failed: ${(e as Error).message}${code}`,
      };
    }
  }
  const r = await runBash({
    command: job.prompt,
    timeoutMs: job.timeoutMs ?? 0,
    clock: deps.clock,
    env: {
      ...deps.env,
      SVC_CRON_JOB: job.name,
      SVC_CRON_SCHEDULED_MINUTE: iso(entry.scheduledMinute),
    },
    cwd: deps.env.HOME ?? deps.home,
    signal,
  });
  const tail = r.outputTail === '' ? null : r.outputTail;
  if (r.spawnError) return { outcome: 'failed', exitCode: null, outputTail: tail, detail: r.spawnError };
  if (r.aborted) {
    return {
      outcome: 'interrupted',
      exitCode: r.exitCode,
      outputTail: tail,
      detail: 'killed: svcd stopped',
    };
  }
  if (r.timedOut) {
    return {
      outcome: 'timeout',
      exitCode: r.exitCode,
      outputTail: tail,
      detail: `killed after the timeout of ${Math.round((job.timeoutMs ?? 0) / 1000)} s`,
    };
  }
  if (r.exitCode === 0) return { outcome: 'ok', exitCode: 0, outputTail: tail, detail: null };
  return {
    outcome: 'failed',
    exitCode: r.exitCode,
    outputTail: tail,
    detail: r.signal ? `bash ended by ${r.signal}` : `exit code ${r.exitCode}`,
  };
}

/** The cron.fire matrix event of an entry and how it ended. */
export function eventOf(
  nodeId: string,
  entry: Entry,
  r: { outcome: CronFireEventPayload['outcome']; exitCode: number | null; durationMs: number | null },
): CronFireEventPayload {
  return {
    kind: 'cron.fire',
    node_id: nodeId,
    job: entry.job,
    scheduled_minute: iso(entry.scheduledMinute),
    dispatch: entry.dispatch,
    outcome: r.outcome,
    reason: entry.reason,
    catch_up: entry.catchUp,
    exit_code: r.exitCode,
    duration_ms: r.durationMs,
  };
}

function missedText(m: { first: number; last: number; count: number | null }): string {
  if (m.first === m.last) return iso(m.first);
  const n = m.count === null ? 'scheduled minutes' : `${m.count} scheduled minutes`;
  return `${n} from ${iso(m.first)} to ${iso(m.last)}`;
}
