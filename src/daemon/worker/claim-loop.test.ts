import { afterEach, describe, expect, it } from 'vitest';
import { FakeMesh } from '../../../test/support/fake-mesh.js';
import { FakeClock } from '../../lib/clock.js';
import { silentLogger } from '../../lib/log.js';
import { SvcError } from '../../protocol/errors.js';
import { ClaimLoop, type ClaimLoopOptions } from './claim-loop.js';
import type { Lease } from './mesh-api.js';
import type { SubagentOutcome } from './subagent.js';

/** Subagents the test finishes by hand. */
class Runs {
  readonly live = new Map<string, { finish(state?: 'completed' | 'failed'): void; signal: AbortSignal }>();
  readonly started: string[] = [];
  execute = (lease: Lease, signal: AbortSignal): Promise<SubagentOutcome> =>
    new Promise((resolve) => {
      const id = lease.task.id;
      this.started.push(id);
      const finish = (state: 'completed' | 'failed' = 'completed') => {
        this.live.delete(id);
        resolve(
          state === 'completed'
            ? ({ task_id: id, state, run: null } as unknown as SubagentOutcome)
            : { task_id: id, state, reason: 'x', run: null },
        );
      };
      signal.addEventListener('abort', () => {
        this.live.delete(id);
        resolve({ task_id: id, state: 'abandoned', reason: String(signal.reason), run: null });
      });
      this.live.set(id, { finish, signal });
    });
}

describe('claim loop', () => {
  let loop: ClaimLoop | null = null;
  afterEach(async () => {
    await loop?.stop();
    loop = null;
  });

  function make(mesh: FakeMesh, runs: Runs, clock: FakeClock, over: Partial<ClaimLoopOptions> = {}) {
    loop = new ClaimLoop({
      agentId: 'agt_1',
      maxConcurrent: 2,
      pollMs: 30_000,
      api: mesh,
      clock,
      log: silentLogger(),
      execute: runs.execute,
      ...over,
    });
    return loop;
  }

  it('claims at start up to max_concurrent, and claims the next task as soon as a slot frees', async () => {
    const mesh = new FakeMesh();
    for (const id of ['t1', 't2', 't3']) mesh.add(id, '');
    const runs = new Runs();
    const clock = new FakeClock(1_000_000);
    const l = make(mesh, runs, clock);
    l.start();
    await clock.advance(0);
    expect(runs.started).toEqual(['t1', 't2']);
    expect(l.status().running.map((r) => r.task_id)).toEqual(['t1', 't2']);
    runs.live.get('t1')?.finish();
    await clock.advance(0);
    expect(runs.started).toEqual(['t1', 't2', 't3']);
    expect(l.status().recent_claims.map((c) => [c.task_id, c.wake])).toEqual([
      ['t1', 'start'],
      ['t2', 'start'],
      ['t3', 'slot_free'],
    ]);
    expect(l.status().counts).toMatchObject({ claimed: 3, completed: 1 });
  });

  it('claims a new task when woken by task_ready, without waiting for the poll', async () => {
    const mesh = new FakeMesh();
    const runs = new Runs();
    const clock = new FakeClock(1_000_000);
    const l = make(mesh, runs, clock);
    l.start();
    await clock.advance(0);
    expect(runs.started).toEqual([]);
    mesh.add('t1', '');
    l.wake('task_ready');
    await clock.advance(0);
    expect(runs.started).toEqual(['t1']);
    expect(l.status().recent_claims[0]).toMatchObject({
      task_id: 't1',
      wake: 'task_ready',
      woken_at: new Date(1_000_000).toISOString(),
    });
  });

  it('finds work by the periodic poll when no task_ready arrives', async () => {
    const mesh = new FakeMesh();
    const runs = new Runs();
    const clock = new FakeClock(1_000_000);
    const l = make(mesh, runs, clock);
    l.start();
    await clock.advance(0);
    mesh.add('t1', '');
    await clock.advance(29_999);
    expect(runs.started).toEqual([]);
    await clock.advance(1);
    expect(runs.started).toEqual(['t1']);
    expect(l.status().recent_claims[0]?.wake).toBe('poll');
    expect(l.status().last_poll_at).toBe(new Date(1_030_000).toISOString());
  });

  it('coalesces wake-ups that arrive during a claim into one more claim round', async () => {
    const mesh = new FakeMesh();
    const runs = new Runs();
    const clock = new FakeClock(0);
    const l = make(mesh, runs, clock, { maxConcurrent: 10 });
    l.start();
    for (let i = 0; i < 5; i++) l.wake('task_ready');
    await clock.advance(0);
    // start: one empty claim; the five wake-ups during it: one more round
    expect(mesh.claims.length).toBe(2);
  });

  it('keeps going after a failed claim: the next poll claims', async () => {
    const mesh = new FakeMesh();
    mesh.add('t1', '');
    const runs = new Runs();
    const clock = new FakeClock(0);
    let down = true;
    const api = {
      claim: (a: string) =>
        down ? Promise.reject(new SvcError('tower_unreachable', 'cannot reach the tower')) : mesh.claim(a),
    };
    const l = make(mesh, runs, clock, { api });
    l.start();
    await clock.advance(0);
    expect(l.status().last_error).toBe('cannot reach the tower');
    down = false;
    await clock.advance(30_000);
    expect(runs.started).toEqual(['t1']);
    expect(l.status().last_error).toBeNull();
  });

  it('stops the subagent of a cancelled task with reason "cancelled"', async () => {
    const mesh = new FakeMesh();
    mesh.add('t1', '');
    const runs = new Runs();
    const clock = new FakeClock(0);
    const l = make(mesh, runs, clock);
    l.start();
    await clock.advance(0);
    const signal = runs.live.get('t1')?.signal;
    expect(l.cancelTask('nope')).toBe(false);
    expect(l.cancelTask('t1')).toBe(true);
    expect(signal?.reason).toBe('cancelled');
    await clock.advance(0);
    expect(l.status().running).toEqual([]);
  });

  it('on stop, stops running subagents and claims nothing more; with drain it waits for them', async () => {
    const mesh = new FakeMesh();
    mesh.add('t1', '');
    mesh.add('t2', '');
    const runs = new Runs();
    const clock = new FakeClock(0);
    const l = make(mesh, runs, clock, { maxConcurrent: 1 });
    l.start();
    await clock.advance(0);
    const signal = runs.live.get('t1')?.signal;
    let stopped = false;
    const stopping = l.stop({ drain: true }).then(() => {
      stopped = true;
    });
    await clock.advance(0);
    expect(stopped).toBe(false);
    runs.live.get('t1')?.finish();
    await stopping;
    expect(signal?.aborted).toBe(false);
    expect(runs.started).toEqual(['t1']);

    const l2 = make(mesh, runs, clock, { maxConcurrent: 1 });
    l2.start();
    await clock.advance(0);
    const s2 = runs.live.get('t2')?.signal;
    await l2.stop();
    expect(s2?.reason).toBe('shutdown');
    expect(l2.status().counts.abandoned).toBe(1);
    await clock.advance(60_000);
    expect(mesh.claims.length).toBe(2);
  });
});
