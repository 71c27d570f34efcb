import { spawn } from 'node:child_process';
import { afterAll, describe, expect, it } from 'vitest';
import { waitFor } from '../../../test/support/poll.js';
import { readProc, sampleUsage } from './usage.js';

describe('agent usage from /proc', () => {
  // A real process that burns CPU until killed.
  const busy = spawn(process.execPath, ['-e', 'for(;;){}'], { stdio: 'ignore' });
  afterAll(() => {
    busy.kill('SIGKILL');
  });

  it('reads CPU time and resident memory of a live process, and a percent from the second reading on', async () => {
    const pid = busy.pid as number;
    const first = sampleUsage(pid, 10_000, null);
    expect(first.usage).toMatchObject({ cpu_percent: null });
    expect(first.usage?.rss_bytes).toBeGreaterThan(1024 * 1024);
    // Too soon for a window: the state is kept, no percent yet.
    expect(sampleUsage(pid, 10_500, first.state).state).toBe(first.state);
    // Wait until it has used more CPU time (a tick is 10 ms), then read with a known window.
    const t0 = first.state?.ticks ?? 0;
    await waitFor('CPU time to grow', () => (readProc(pid)?.ticks ?? 0) >= t0 + 5);
    const second = sampleUsage(pid, 12_000, first.state);
    // At least 5 ticks over a 2 s window: at least 2.5 % of a core.
    expect(second.usage?.cpu_percent).toBeGreaterThanOrEqual(2.5);
    expect(second.usage?.cpu_seconds).toBeGreaterThan(first.usage?.cpu_seconds ?? 0);
  });

  it('has no usage for a stopped agent or a process that is gone', () => {
    expect(sampleUsage(null, 1, null)).toEqual({ usage: null, state: null });
    expect(sampleUsage(2 ** 22 + 12345, 1, null).usage).toBeNull();
    // The command name may hold ") (": fields are counted after the last ')'.
    expect(readProc(process.pid)?.ticks).toBeGreaterThanOrEqual(0);
  });
});
