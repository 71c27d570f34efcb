// Lease expiry and cancellation on both stores: the sweeper returns or fails expired tasks,
// an expired lease is fenced before the sweep, a cancelled task is never claimed.
import { describe, expect, it } from 'vitest';
import { type Task, useMeshWorld } from '../../../test/support/mesh-tower.js';
import { waitFor } from '../../../test/support/poll.js';
import { STORES } from '../../../test/support/tower.js';

describe.each(STORES)('mesh lease expiry and cancellation on %s', (store) => {
  const w = useMeshWorld(store);
  const { clock, enroll, submit, mcp, claim, drain } = w;

  it('returns expired leases to pending and fails a task past max_attempts', async () => {
    const agent = await enroll();
    await drain(agent.id);
    const task = (await submit({ max_attempts: 2, lease_seconds: 10 })).body as unknown as Task;
    const first = await claim(agent.id);
    expect(first?.task.id).toBe(task.id);
    const stateOf = async () =>
      ((await w.t.call('GET', `/work/tasks/${task.id}`)).body as unknown as Task).state;
    // The sweeper runs every second of the tower's clock: step it until the sweep happened.
    await clock.advance(10_000);
    await waitFor('the sweep', async () => {
      await clock.advance(1000);
      return (await stateOf()) === 'pending';
    });
    expect(((await w.t.call('GET', `/work/tasks/${task.id}`)).body as unknown as Task).attempt).toBe(2);
    const late = await mcp('heartbeat_mesh_task', { task_id: task.id, lease_id: first?.lease_id });
    expect(late.status).toBe(409);
    const second = await claim(agent.id);
    expect(second?.task.id).toBe(task.id);
    // A heartbeat keeps it; then it stops.
    await clock.advance(6_000);
    expect((await mcp('heartbeat_mesh_task', { task_id: task.id, lease_id: second?.lease_id })).status).toBe(
      200,
    );
    await clock.advance(6_000);
    expect(await stateOf()).toBe('claimed');
    await waitFor('the final sweep', async () => {
      await clock.advance(1000);
      return (await stateOf()) === 'failed';
    });
    expect(
      ((await w.t.call('GET', `/work/tasks/${task.id}`)).body as unknown as Task).failure_reason,
    ).toMatch(/lease expired on attempt 2 of 2/);
  });

  it('fences a worker whose lease expired before the sweeper returned its task', async () => {
    const agent = await enroll();
    await drain(agent.id);
    const task = (await submit({ lease_seconds: 10 })).body as unknown as Task;
    const c = await claim(agent.id);
    expect(c?.task.id).toBe(task.id);
    const held = { task_id: task.id, lease_id: c?.lease_id };
    expect((await mcp('start_mesh_task', held)).status).toBe(200);
    // Exactly at expiry: the sweeper (which takes leases strictly past expiry) has not
    // touched the task, yet the lease is dead.
    await clock.advance(10_000);
    const stateOf = async () =>
      ((await w.t.call('GET', `/work/tasks/${task.id}`)).body as unknown as Task).state;
    expect(await stateOf()).toBe('running');
    for (const [tool, extra] of [
      ['complete_mesh_task', { result: { late: true } }],
      ['fail_mesh_task', { reason: 'late' }],
      ['heartbeat_mesh_task', {}],
      ['report_progress', { message: 'late' }],
    ] as const) {
      const r = await mcp(tool, { ...held, ...extra });
      expect([tool, r.status, r.body.code]).toEqual([tool, 409, 'stale_lease']);
    }
    expect(await stateOf()).toBe('running');
    await waitFor('the sweep', async () => {
      await clock.advance(1000);
      return (await stateOf()) === 'pending';
    });
    const again = await claim(agent.id);
    expect(again?.task).toMatchObject({ id: task.id, attempt: 2 });
    expect((await mcp('complete_mesh_task', { task_id: task.id, lease_id: again?.lease_id })).status).toBe(
      200,
    );
  });

  it('cancels once; a cancelled task is not claimable', async () => {
    const agent = await enroll();
    await drain(agent.id);
    const task = (await submit({})).body as unknown as Task;
    expect((await w.t.call('POST', `/work/tasks/${task.id}/cancel`)).body.state).toBe('cancelled');
    expect((await w.t.call('POST', `/work/tasks/${task.id}/cancel`)).status).toBe(409);
    expect(await claim(agent.id)).toBeNull();
  });
});
