// Broadcast tasks on both stores: one run per eligible agent, the parent settling from its
// runs (once, when they end together), retries and cancellations of runs and parents.
import { describe, expect, it } from 'vitest';
import { type Claim, type Task, useMeshWorld } from '../../../test/support/mesh-tower.js';
import { STORES } from '../../../test/support/tower.js';

describe.each(STORES)('mesh broadcast tasks on %s', (store) => {
  const w = useMeshWorld(store);
  const { enroll, submit, mcp } = w;

  it('runs a broadcast task once per eligible agent', async () => {
    const d = ((await w.t.call('POST', '/domains', { name: 'bcast' })).body as { id: string }).id;
    const m = ((await w.t.call('POST', `/domains/${d}/m`, { name: 'b' })).body as { id: string }).id;
    const a1 = await enroll(['x'], d);
    const a2 = await enroll(['x'], d);
    await enroll([], d);
    const parent = (await submit({ claim_policy: 'broadcast', required_capabilities: ['x'] }, m))
      .body as unknown as Task;
    const runs = ((await w.t.call('GET', `/work/missions/${m}/tasks`)).body.items as Task[]).filter(
      (x) => x.parent_id === parent.id,
    );
    expect(runs.length).toBe(2);
    for (const a of [a1, a2]) {
      const c = (await mcp('claim_mesh_task', { agent_id: a.id })).body.result as Claim;
      expect(c.task.parent_id).toBe(parent.id);
      expect((await mcp('claim_mesh_task', { agent_id: a.id })).body.result).toBeNull();
      await mcp('complete_mesh_task', { task_id: c.task.id, lease_id: c.lease_id });
    }
    expect(((await w.t.call('GET', `/work/tasks/${parent.id}`)).body as unknown as Task).state).toBe(
      'completed',
    );
  });

  it('refuses a broadcast task no enrolled agent could run, writing nothing', async () => {
    const d = ((await w.t.call('POST', '/domains', { name: 'bnone' })).body as { id: string }).id;
    const m = ((await w.t.call('POST', `/domains/${d}/m`, { name: 'b' })).body as { id: string }).id;
    await enroll(['x'], d);
    const r = await submit({ claim_policy: 'broadcast', required_capabilities: ['y'] }, m);
    expect([r.status, r.body.code]).toEqual([409, 'conflict']);
    expect((await w.t.call('GET', `/work/missions/${m}/tasks`)).body.items).toEqual([]);
  });

  it('retries the failed runs of a failed broadcast, and reopens the broadcast when one run is retried', async () => {
    const d = ((await w.t.call('POST', '/domains', { name: 'bretry' })).body as { id: string }).id;
    const m = ((await w.t.call('POST', `/domains/${d}/m`, { name: 'b' })).body as { id: string }).id;
    const agents = [await enroll([], d), await enroll([], d), await enroll([], d)];
    const parent = (await submit({ claim_policy: 'broadcast' }, m)).body as unknown as Task;
    const get = async (id: string) => (await w.t.call('GET', `/work/tasks/${id}`)).body as unknown as Task;
    const runOf = async (agentId: string) => {
      const c = (await mcp('claim_mesh_task', { agent_id: agentId })).body.result as Claim;
      expect(c.task.parent_id).toBe(parent.id);
      return c;
    };
    // One run completes, two fail: the broadcast fails.
    const [ok, bad1, bad2] = [
      await runOf(agents[0]?.id ?? ''),
      await runOf(agents[1]?.id ?? ''),
      await runOf(agents[2]?.id ?? ''),
    ];
    await mcp('complete_mesh_task', { task_id: ok.task.id, lease_id: ok.lease_id });
    await mcp('fail_mesh_task', { task_id: bad1.task.id, lease_id: bad1.lease_id, reason: 'a' });
    expect((await get(parent.id)).state).toBe('pending');
    await mcp('fail_mesh_task', { task_id: bad2.task.id, lease_id: bad2.lease_id, reason: 'b' });
    expect((await get(parent.id)).state).toBe('failed');

    // Retrying one run reopens the broadcast; it fails again when that run fails again.
    const r1 = await w.t.call('POST', `/work/tasks/${bad1.task.id}/retry`);
    expect(r1.body).toMatchObject({ state: 'pending', attempt: 2 });
    expect((await get(parent.id)).state).toBe('pending');
    const again = await runOf(agents[1]?.id ?? '');
    expect(again.task.id).toBe(bad1.task.id);
    await mcp('fail_mesh_task', { task_id: bad1.task.id, lease_id: again.lease_id, reason: 'a2' });
    expect((await get(parent.id)).state).toBe('failed');

    // Retrying the broadcast retries both failed runs (not the completed one); it completes
    // when they do.
    const r2 = await w.t.call('POST', `/work/tasks/${parent.id}/retry`);
    expect(r2.body).toMatchObject({ state: 'pending', attempt: 2, failure_reason: null });
    expect((await get(ok.task.id)).state).toBe('completed');
    for (const [agent, run] of [
      [agents[1], bad1],
      [agents[2], bad2],
    ] as const) {
      const c = await runOf(agent?.id ?? '');
      expect(c.task).toMatchObject({ id: run.task.id, state: 'claimed' });
      await mcp('complete_mesh_task', { task_id: c.task.id, lease_id: c.lease_id });
    }
    expect((await get(parent.id)).state).toBe('completed');
    expect((await w.t.call('POST', `/work/tasks/${parent.id}/retry`)).status).toBe(409);
  });

  it('does not retry a broadcast whose unfinished runs were cancelled, nor a run of a cancelled broadcast', async () => {
    const d = ((await w.t.call('POST', '/domains', { name: 'bcancel' })).body as { id: string }).id;
    const m = ((await w.t.call('POST', `/domains/${d}/m`, { name: 'b' })).body as { id: string }).id;
    const [a1, a2] = [await enroll([], d), await enroll([], d)];
    const parent = (await submit({ claim_policy: 'broadcast' }, m)).body as unknown as Task;
    const c1 = (await mcp('claim_mesh_task', { agent_id: a1.id })).body.result as Claim;
    await mcp('fail_mesh_task', { task_id: c1.task.id, lease_id: c1.lease_id, reason: 'x' });
    expect((await w.t.call('POST', `/work/tasks/${parent.id}/cancel`)).body.state).toBe('cancelled');
    const r = await w.t.call('POST', `/work/tasks/${c1.task.id}/retry`);
    expect([r.status, r.body.code]).toEqual([409, 'illegal_transition']);
    const runs = ((await w.t.call('GET', `/work/missions/${m}/tasks`)).body.items as Task[])
      .filter((x) => x.parent_id === parent.id)
      .map((x) => x.state)
      .sort();
    expect(runs).toEqual(['cancelled', 'failed']);
    expect((await mcp('claim_mesh_task', { agent_id: a2.id })).body.result).toBeNull();

    // A broadcast that failed because a run was cancelled has nothing to retry.
    const p2 = (await submit({ claim_policy: 'broadcast' }, m)).body as unknown as Task;
    const c2 = (await mcp('claim_mesh_task', { agent_id: a1.id })).body.result as Claim;
    await mcp('complete_mesh_task', { task_id: c2.task.id, lease_id: c2.lease_id });
    const other = (
      ((await w.t.call('GET', `/work/missions/${m}/tasks`)).body.items as Task[]).find(
        (x) => x.parent_id === p2.id && x.id !== c2.task.id,
      ) as Task
    ).id;
    expect((await w.t.call('POST', `/work/tasks/${other}/cancel`)).body.state).toBe('cancelled');
    expect(((await w.t.call('GET', `/work/tasks/${p2.id}`)).body as unknown as Task).state).toBe('failed');
    const r2 = await w.t.call('POST', `/work/tasks/${p2.id}/retry`);
    expect([r2.status, r2.body.code]).toEqual([409, 'illegal_transition']);
  });

  it('settles a broadcast once when its runs end at the same moment', async () => {
    const d = ((await w.t.call('POST', '/domains', { name: 'bsettle' })).body as { id: string }).id;
    const m = ((await w.t.call('POST', `/domains/${d}/m`, { name: 'b' })).body as { id: string }).id;
    const agents = await Promise.all(Array.from({ length: 4 }, () => enroll([], d)));
    const parents: string[] = [];
    for (let i = 0; i < 10; i++) {
      parents.push(
        ((await submit({ title: `p${i}`, claim_policy: 'broadcast' }, m)).body as unknown as Task).id,
      );
    }
    const claims: Claim[] = [];
    for (const a of agents) {
      const got = (await mcp('claim_mesh_tasks', { agent_id: a.id, max: 100 })).body.result as {
        items: Claim[];
      };
      claims.push(...got.items);
    }
    expect(claims.length).toBe(40);
    // The runs of one broadcast side by side, so they end together (in the pool's window).
    claims.sort((a, b) => (a.task.parent_id ?? '').localeCompare(b.task.parent_id ?? ''));
    await Promise.all(
      claims.map((c) => mcp('complete_mesh_task', { task_id: c.task.id, lease_id: c.lease_id })),
    );
    for (const id of parents) {
      expect([id, ((await w.t.call('GET', `/work/tasks/${id}`)).body as unknown as Task).state]).toEqual([
        id,
        'completed',
      ]);
    }
  });
});
