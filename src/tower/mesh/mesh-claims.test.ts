// Claiming and completing mesh tasks on both stores: order, leases, assignment and
// capabilities, concurrent claimers, batches of claims and completions.
import { describe, expect, it } from 'vitest';
import { loggedEvents } from '../../../test/support/events.js';
import { type Claim, type Task, useMeshWorld } from '../../../test/support/mesh-tower.js';
import { STORES } from '../../../test/support/tower.js';

describe.each(STORES)('mesh claims on %s', (store) => {
  const w = useMeshWorld(store);
  const { enroll, submit, mcp, claim, drain } = w;

  it('enrols agents with a node credential only', async () => {
    const a = await enroll(['gpu']);
    expect(a).toMatchObject({
      node_id: w.node.id,
      domain_id: w.domainId,
      runtime: 'beta_cli',
      capabilities: ['gpu'],
      status: 'idle',
    });
    const byAdmin = await w.t.call('POST', '/agents', { domain_id: w.domainId, runtime: 'beta_cli' });
    expect(byAdmin.status).toBe(403);
    expect((await w.t.call('GET', `/agents/${a.id}`)).body.id).toBe(a.id);
    expect(
      ((await w.t.call('GET', `/agents?node_id=${w.node.id}`)).body.items as unknown[]).length,
    ).toBeGreaterThan(0);
  });

  it('claims by priority then age, fences stale leases, and retries only failed tasks', async () => {
    const agent = await enroll();
    await drain(agent.id);
    const low = (await submit({ title: 'low', priority: 1 })).body as unknown as Task;
    const high = (await submit({ title: 'high', priority: 5 })).body as unknown as Task;
    const low2 = (await submit({ title: 'low2', priority: 1 })).body as unknown as Task;
    const c1 = await claim(agent.id);
    expect(c1?.task.id).toBe(high.id);
    expect(c1?.lease_seconds).toBe(60);
    // The task a claim hands out is the task as stored (PostgreSQL builds it from fewer columns).
    expect(c1?.task).toEqual((await w.t.call('GET', `/work/tasks/${high.id}`)).body);
    expect((await claim(agent.id))?.task.id).toBe(low.id);
    const c3 = await claim(agent.id);
    expect(c3?.task.id).toBe(low2.id);
    expect(await claim(agent.id)).toBeNull();

    const stale = await mcp('complete_mesh_task', { task_id: high.id, lease_id: 'lease_wrong' });
    expect(stale.status).toBe(409);
    expect(stale.body.code).toBe('stale_lease');
    const started = await mcp('start_mesh_task', { task_id: high.id, lease_id: c1?.lease_id });
    expect((started.body.result as Task).state).toBe('running');
    await mcp('report_progress', { task_id: high.id, lease_id: c1?.lease_id, message: 'half', percent: 50 });
    const done = await mcp('complete_mesh_task', {
      task_id: high.id,
      lease_id: c1?.lease_id,
      result: { ok: 1 },
    });
    expect(done.body.result).toMatchObject({ state: 'completed', result: { ok: 1 } });
    expect((await w.t.call('POST', `/work/tasks/${high.id}/retry`)).status).toBe(409);

    const failed = await mcp('fail_mesh_task', {
      task_id: low2.id,
      lease_id: c3?.lease_id,
      reason: 'exit 2',
    });
    expect(failed.body.result).toMatchObject({ state: 'failed', failure_reason: 'exit 2' });
    const retried = await w.t.call('POST', `/work/tasks/${low2.id}/retry`);
    expect(retried.body).toMatchObject({ state: 'pending', attempt: 2, failure_reason: null });
    const again = await claim(agent.id);
    expect(again?.task).toMatchObject({ id: low2.id, attempt: 2, state: 'claimed' });
    expect(again?.task).toEqual((await w.t.call('GET', `/work/tasks/${low2.id}`)).body);

    const events = (await loggedEvents(w.t.tower.store.db)).filter((e) => e.mission_id === w.missionId);
    const forHigh = events.filter((e) => (JSON.parse(e.payload) as { id?: string }).id === high.id);
    expect(forHigh.map((e) => e.status)).toEqual(['pending', 'claimed', 'running', 'completed']);
    expect(events.some((e) => e.type === 'progress')).toBe(true);
  });

  it('honours assigned agents and required capabilities', async () => {
    const plain = await enroll();
    const gpu = await enroll(['gpu', 'linux']);
    await drain(plain.id);
    await drain(gpu.id);
    expect((await submit({ claim_policy: 'assigned' })).status).toBe(400);
    const assigned = (await submit({ claim_policy: 'assigned', assigned_agent_id: gpu.id }))
      .body as unknown as Task;
    const needsGpu = (await submit({ required_capabilities: ['gpu'] })).body as unknown as Task;
    // A creation answers with the task as stored, and an assigned task's event names its agent.
    for (const task of [assigned, needsGpu]) {
      expect((await w.t.call('GET', `/work/tasks/${task.id}`)).body).toEqual(task);
    }
    const createdOf = (await loggedEvents(w.t.tower.store.db)).find((e) => {
      const p = JSON.parse(e.payload) as { id?: string; action?: string };
      return p.id === assigned.id && p.action === 'created';
    });
    expect([createdOf?.agent_id, createdOf?.status]).toEqual([gpu.id, 'pending']);
    expect(await claim(plain.id)).toBeNull();
    const claimed = [await claim(gpu.id), await claim(gpu.id)];
    expect(claimed.map((c) => c?.task.id).sort()).toEqual([assigned.id, needsGpu.id].sort());
    for (const c of claimed) {
      expect(c?.task).toEqual((await w.t.call('GET', `/work/tasks/${c?.task.id}`)).body);
    }
  });

  it('refuses a task assigned to an agent not enrolled in its domain with 404 naming the agent', async () => {
    const otherDomain = ((await w.t.call('POST', '/domains', { name: 'elsewhere' })).body as { id: string })
      .id;
    const stranger = await enroll([], otherDomain);
    const before = (await w.t.call('GET', `/work/missions/${w.missionId}/tasks?limit=500`)).body
      .items as Task[];
    for (const agentId of ['ag_nosuchagent', stranger.id]) {
      const r = await submit({ claim_policy: 'assigned', assigned_agent_id: agentId });
      expect([r.status, r.body.code]).toEqual([404, 'agent_not_found']);
      expect(r.body.detail).toBe(
        `agent ${agentId} is not enrolled in domain ${w.domainId} (the mission's): an assigned task needs an agent that can claim it (see: svc agent list --domain ${w.domainId})`,
      );
    }
    // Nothing was written: no task, no event.
    const after = (await w.t.call('GET', `/work/missions/${w.missionId}/tasks?limit=500`)).body
      .items as Task[];
    expect(after.map((x) => x.id)).toEqual(before.map((x) => x.id));
    const refused = (await loggedEvents(w.t.tower.store.db)).filter(
      (e) => ['ag_nosuchagent', stranger.id].includes(e.agent_id ?? '') && e.payload.includes('"created"'),
    );
    expect(refused).toEqual([]);
  });

  it('gives each task to exactly one of many concurrent claimers', async () => {
    const d = ((await w.t.call('POST', '/domains', { name: 'race' })).body as { id: string }).id;
    const m = ((await w.t.call('POST', `/domains/${d}/m`, { name: 'r' })).body as { id: string }).id;
    const agents = await Promise.all(Array.from({ length: 12 }, () => enroll([], d)));
    for (let i = 0; i < 8; i++) await submit({ title: `r${i}` }, m);
    const claims = await Promise.all(
      agents.map(async (a) => (await mcp('claim_mesh_task', { agent_id: a.id })).body.result as Claim | null),
    );
    const ids = claims.filter((c) => c !== null).map((c) => c.task.id);
    expect(ids.length).toBe(8);
    expect(new Set(ids).size).toBe(8);
  });

  it('claims several tasks at once, best first, each with its own lease; concurrent completes each settle once', async () => {
    const d = ((await w.t.call('POST', '/domains', { name: 'batch' })).body as { id: string }).id;
    const m = ((await w.t.call('POST', `/domains/${d}/m`, { name: 'b' })).body as { id: string }).id;
    const agent = await enroll(['gpu'], d);
    const other = await enroll([], d);
    const ids: string[] = [];
    for (let i = 0; i < 5; i++)
      ids.push(((await submit({ title: `b${i}`, priority: i % 2 }, m)).body as unknown as Task).id);
    const notMine = (
      (await submit({ claim_policy: 'assigned', assigned_agent_id: other.id }, m)).body as unknown as Task
    ).id;
    const gpuOnly = (
      (await submit({ required_capabilities: ['gpu'], priority: -1 }, m)).body as unknown as Task
    ).id;
    const bad = await mcp('claim_mesh_tasks', { agent_id: agent.id, max: 0 });
    expect(bad.status).toBe(400);
    expect(JSON.stringify(bad.body)).toContain('args/max');
    const first = (await mcp('claim_mesh_tasks', { agent_id: agent.id, mission_id: m, max: 4 })).body
      .result as {
      items: Claim[];
    };
    // Priority 1 first (b1, b3), then the oldest of priority 0 (b0, b2).
    expect(first.items.map((c) => c.task.id)).toEqual([ids[1], ids[3], ids[0], ids[2]]);
    expect(new Set(first.items.map((c) => c.lease_id)).size).toBe(4);
    expect(first.items.every((c) => c.task.state === 'claimed' && c.task.claimed_by === agent.id)).toBe(true);
    const rest = (await mcp('claim_mesh_tasks', { agent_id: agent.id, max: 100 })).body.result as {
      items: Claim[];
    };
    expect(rest.items.map((c) => c.task.id)).toEqual([ids[4], gpuOnly]);
    expect(
      ((await mcp('claim_mesh_tasks', { agent_id: agent.id, max: 5 })).body.result as { items: Claim[] })
        .items,
    ).toEqual([]);
    expect((await mcp('claim_mesh_tasks', { agent_id: 'ag_nope', max: 5 })).body.code).toBe(
      'agent_not_found',
    );

    // Every claim completed at once, one of them twice: each task completes exactly once.
    const all = [...first.items, ...rest.items];
    const outcomes = await Promise.all(
      [...all, all[0] as Claim].map((c) =>
        mcp('complete_mesh_task', { task_id: c.task.id, lease_id: c.lease_id, result: { n: c.task.id } }),
      ),
    );
    expect(outcomes.filter((o) => o.status === 200).length).toBe(all.length);
    expect(outcomes.filter((o) => o.status === 409).map((o) => o.body.code)).toEqual(['stale_lease']);
    for (const c of all) {
      const got = (await w.t.call('GET', `/work/tasks/${c.task.id}`)).body as unknown as Task & {
        result: unknown;
      };
      expect(got).toMatchObject({ state: 'completed', result: { n: c.task.id } });
    }
    const unknown = await mcp('complete_mesh_task', { task_id: 'mt_nope', lease_id: 'lease_x' });
    expect(unknown.status).toBe(404);
    expect(((await w.t.call('GET', `/work/tasks/${notMine}`)).body as unknown as Task).state).toBe('pending');

    // Insertion order: the id on both stores (given at insert).
    const events = (await loggedEvents(w.t.tower.store.db)).filter((e) => e.mission_id === m);
    for (const c of all) {
      const mine = events
        .map((e) => ({ ...e, p: JSON.parse(e.payload) as Record<string, unknown> }))
        .filter((e) => e.p.id === c.task.id);
      expect(mine.map((e) => e.p.action)).toEqual(['created', 'claimed', 'completed']);
      expect(mine[1]).toMatchObject({ type: 'matrix', agent_id: agent.id, status: 'claimed' });
      expect(mine[2]?.p).toEqual({
        entity: 'mesh_task',
        action: 'completed',
        id: c.task.id,
        title: c.task.title,
        state: 'completed',
        attempt: 1,
      });
    }
  });

  it('completes several tasks in one call, each with its own outcome', async () => {
    const d = ((await w.t.call('POST', '/domains', { name: 'cmany' })).body as { id: string }).id;
    const m = ((await w.t.call('POST', `/domains/${d}/m`, { name: 'c' })).body as { id: string }).id;
    const agent = await enroll([], d);
    for (let i = 0; i < 3; i++) await submit({ title: `c${i}` }, m);
    const claims = (
      (await mcp('claim_mesh_tasks', { agent_id: agent.id, max: 3 })).body.result as { items: Claim[] }
    ).items;
    expect(claims.length).toBe(3);
    const [a, b, c] = claims as [Claim, Claim, Claim];
    const r = await mcp('complete_mesh_tasks', {
      items: [
        { task_id: a.task.id, lease_id: a.lease_id, result: { i: 0 } },
        { task_id: b.task.id, lease_id: 'lease_wrong' },
        { task_id: c.task.id, lease_id: c.lease_id },
        { task_id: 'mt_nope', lease_id: 'lease_x' },
      ],
    });
    expect(r.status).toBe(200);
    const items = (r.body.result as { items: Record<string, unknown>[] }).items;
    expect(items.map((x) => [x.task_id, x.ok, x.code ?? null])).toEqual([
      [a.task.id, true, null],
      [b.task.id, false, 'stale_lease'],
      [c.task.id, true, null],
      ['mt_nope', false, 'not_found'],
    ]);
    // A completed item is an acknowledgement: the completion time, not the task.
    expect(Object.keys(items[0] ?? {}).sort()).toEqual(['ok', 'task_id', 'updated_at']);
    const done = (await w.t.call('GET', `/work/tasks/${a.task.id}`)).body as unknown as Task;
    expect(done).toMatchObject({ state: 'completed', result: { i: 0 }, updated_at: items[0]?.updated_at });
    expect(((await w.t.call('GET', `/work/tasks/${b.task.id}`)).body as unknown as Task).state).toBe(
      'claimed',
    );
    // The same task twice in one call: the first completes it, the second finds its lease gone.
    const twice = await mcp('complete_mesh_tasks', {
      items: [
        { task_id: b.task.id, lease_id: b.lease_id },
        { task_id: b.task.id, lease_id: b.lease_id },
      ],
    });
    expect(
      (twice.body.result as { items: Record<string, unknown>[] }).items.map((x) => [x.ok, x.code ?? null]),
    ).toEqual([
      [true, null],
      [false, 'stale_lease'],
    ]);
    expect((await mcp('complete_mesh_tasks', { items: [] })).status).toBe(400);
  });
});
