// The one place that decides which jobs are due in a minute, which are skipped and why, and
// what a restart after downtime catches up. Pure: no clock, no storage, no processes; the
// tick (cron.ts) feeds it what state.db remembers and carries out what it returns.
import type { CronJob } from './config.js';
import { MINUTE_MS } from './schedule.js';

export interface TickInput {
  jobs: readonly CronJob[];
  /** The minute being processed (ms since the epoch, a multiple of 60 000). */
  minute: number;
  /**
   * The last minute a tick processed before this one (persisted across restarts), or null
   * when svcd never ticked. Minutes strictly between it and `minute` were missed: svcd was
   * down (or the host suspended).
   */
  lastTick: number | null;
  /** Heartbeat jobs: the minute of their last slot (fired or skipped). */
  heartbeats: ReadonlyMap<string, number>;
  /** Jobs whose previous fire is still running. */
  running: { has(job: string): boolean };
}

export type SkipReason = 'disabled' | 'overlap' | 'missed_while_down';

export interface Missed {
  /** First and last scheduled minute missed. */
  first: number;
  last: number;
  /** How many were missed; null when counting would be costly (cron expressions). */
  count: number | null;
}

export type Decision =
  | {
      action: 'fire';
      job: CronJob;
      /** The scheduled minute this fire belongs to: with the job name, its dedup key. */
      minute: number;
      /** Set when this fire is the catch-up of minutes missed while down. */
      missed: Missed | null;
    }
  | {
      action: 'skip';
      job: CronJob;
      minute: number;
      reason: SkipReason;
      missed: Missed | null;
    };

/**
 * Decides one minute. Per job, at most one decision for the minute itself (fire, or skip as
 * disabled/overlap) and, after downtime, at most one about the minutes missed (a catch-up
 * fire of the latest when catch_up = "latest" and the job is not due now anyway, else one
 * skip recording them). Decisions come in job order; fires of a job never repeat a minute
 * because the caller admits each (job, minute) once through its dedup keys.
 */
export function dueJobs(input: TickInput): Decision[] {
  const { minute, lastTick } = input;
  const gap = lastTick !== null && lastTick < minute - MINUTE_MS;
  const out: Decision[] = [];
  for (const job of input.jobs) {
    const s = job.schedule;
    let dueNow: boolean;
    let missed: Missed | null = null;
    if (s.kind === 'schedule') {
      dueNow = s.firesAt(minute);
      if (gap && lastTick !== null) {
        const first = s.nextAfter(lastTick);
        if (first !== null && first < minute) {
          missed = { first, last: s.latestBefore(minute) ?? first, count: null };
        }
      }
    } else {
      const last = input.heartbeats.get(job.name);
      const every = s.intervalMs;
      if (last === undefined || last >= minute) {
        // Never fired: the first beat is the first minute the job is seen. A slot at or after
        // this minute (restart inside the minute, or the clock set back) is already handled.
        dueNow = last === undefined;
      } else if (!gap) {
        // Up the whole time: due once the interval has elapsed since the last slot. Later
        // than last + every only when the interval changed by reload.
        dueNow = minute - last >= every;
      } else {
        const slots = Math.floor((minute - last) / every);
        const onGrid = last + slots * every;
        dueNow = onGrid === minute;
        const lastMissed = dueNow ? onGrid - every : onGrid;
        if (lastMissed > last) {
          const count = dueNow ? slots - 1 : slots;
          missed = { first: last + every, last: lastMissed, count };
        }
      }
    }

    if (missed) {
      const catchUp = job.catchUp === 'latest' && job.enabled && !dueNow && !input.running.has(job.name);
      out.push(
        catchUp
          ? { action: 'fire', job, minute: missed.last, missed }
          : { action: 'skip', job, minute: missed.last, reason: 'missed_while_down', missed },
      );
    }
    if (dueNow) {
      if (!job.enabled) out.push({ action: 'skip', job, minute, reason: 'disabled', missed: null });
      else if (input.running.has(job.name))
        out.push({ action: 'skip', job, minute, reason: 'overlap', missed: null });
      else out.push({ action: 'fire', job, minute, missed: null });
    }
  }
  return out;
}

/** The heartbeat slot each heartbeat job reaches in these decisions (to persist). */
export function heartbeatSlots(decisions: readonly Decision[]): Map<string, number> {
  const slots = new Map<string, number>();
  for (const d of decisions) {
    if (d.job.schedule.kind !== 'heartbeat') continue;
    slots.set(d.job.name, Math.max(slots.get(d.job.name) ?? d.minute, d.minute));
  }
  return slots;
}
