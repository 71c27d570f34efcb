import { describe, expect, it } from 'vitest';
import { at, job, MIN } from '../../../test/support/cron.js';
import type { Decision } from './due-jobs.js';
import { entryOf, eventOf } from './fire.js';

const NOW = at('2025-06-02T10:00:07Z');
const M = at('2025-06-02T10:00Z');
const backup = job({ name: 'backup', cron: '0 * * * *', dispatch: 'bash', catchUp: 'latest' });

describe('the history entry of a decision', () => {
  it.each<{ name: string; d: Decision; runningSince?: number; want: object }>([
    {
      name: 'a fire runs now, with no detail',
      d: { action: 'fire', job: backup, minute: M, missed: null },
      want: { outcome: 'running', reason: null, catchUp: false, startedAt: NOW, detail: null },
    },
    {
      name: 'a catch-up fire says which missed minutes it stands for',
      d: {
        action: 'fire',
        job: backup,
        minute: M - 60 * MIN,
        missed: { first: M - 120 * MIN, last: M - 60 * MIN, count: 2 },
      },
      want: {
        outcome: 'running',
        catchUp: true,
        detail:
          'catch-up (catch_up = "latest") of the most recent minute missed while svcd was down (2 scheduled minutes from 2025-06-02T08:00:00.000Z to 2025-06-02T09:00:00.000Z)',
      },
    },
    {
      name: 'a disabled job is skipped',
      d: { action: 'skip', job: backup, minute: M, reason: 'disabled', missed: null },
      want: {
        outcome: 'skipped',
        reason: 'disabled',
        startedAt: null,
        detail: 'the job is disabled (enabled = false)',
      },
    },
    {
      name: 'an overlap names the minute of the fire still running',
      d: { action: 'skip', job: backup, minute: M, reason: 'overlap', missed: null },
      runningSince: M - 60 * MIN,
      want: { reason: 'overlap', detail: 'the fire of 2025-06-02T09:00:00.000Z is still running' },
    },
    {
      name: 'missed minutes of a catch_up = "latest" job due now anyway are not caught up',
      d: {
        action: 'skip',
        job: backup,
        minute: M - 60 * MIN,
        reason: 'missed_while_down',
        missed: { first: M - 60 * MIN, last: M - 60 * MIN, count: 1 },
      },
      want: {
        reason: 'missed_while_down',
        detail:
          'missed while svcd was down (2025-06-02T09:00:00.000Z); not caught up because the job is due in this minute anyway',
      },
    },
  ])('$name', ({ d, runningSince, want }) => {
    expect(entryOf(d, NOW, runningSince ?? null)).toMatchObject({
      job: 'backup',
      scheduledMinute: d.minute,
      dispatch: 'bash',
      ...want,
    });
  });

  it('becomes a cron.fire event with the node and the outcome', () => {
    const entry = entryOf({ action: 'fire', job: backup, minute: M, missed: null }, NOW, null);
    expect(eventOf('node_1', entry, { outcome: 'ok', exitCode: 0, durationMs: 1200 })).toEqual({
      kind: 'cron.fire',
      node_id: 'node_1',
      job: 'backup',
      scheduled_minute: '2025-06-02T10:00:00.000Z',
      dispatch: 'bash',
      outcome: 'ok',
      reason: null,
      catch_up: false,
      exit_code: 0,
      duration_ms: 1200,
    });
  });
});
