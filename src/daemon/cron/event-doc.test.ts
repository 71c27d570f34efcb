// docs/events.md describes the cron fire event svcd publishes: every payload field, and no field
// it does not send (the page once listed a `minute` the event never had).
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import type { CronFireEventPayload } from '../../protocol/cron.js';

// Exactly the payload's keys: tsc refuses a missing or an extra one.
const FIELDS: Record<keyof CronFireEventPayload, true> = {
  kind: true,
  node_id: true,
  job: true,
  scheduled_minute: true,
  dispatch: true,
  outcome: true,
  reason: true,
  catch_up: true,
  exit_code: true,
  duration_ms: true,
};

describe('docs/events.md, cron fires', () => {
  it('lists the payload svcd sends, field for field', () => {
    const doc = readFileSync(new URL('../../../docs/events.md', import.meta.url), 'utf8');
    const item = /- Cron fires[\s\S]*?`\{([^}]*)\}`/.exec(doc)?.[1];
    expect(item, 'the cron item of docs/events.md').toBeDefined();
    const listed = (item as string).split(',').map((f) => f.trim().replace(/:.*$/, ''));
    expect(listed).toEqual(Object.keys(FIELDS));
  });
});
