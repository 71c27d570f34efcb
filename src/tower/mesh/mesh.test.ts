import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loggedEvents } from '../../../test/support/events.js';
import { waitFor } from '../../../test/support/poll.js';
import { STORES, startTestTower, type TestTower } from '../../../test/support/tower.js';
import { FakeClock } from '../../lib/clock.js';

interface Task {
  id: string;
  title: string;
  state: string;
  attempt: number;
  claimed_by: string | null;
  failure_reason: string | null;
  parent_id: string | null;
}
interface Claim {
  task: Task;
  lease_id: string;
  lease_seconds: number;
}

describe.each(STORES)('mesh tasks on %s', (store) => {
  let t: TestTower;
  const clock = new FakeClock(Date.parse('2026-11-23T10:00:00Z'));
  let node: { id: string; jwt: string };
  let domainId: string;
  let missionId: string;

  beforeAll(async () => {
    t = await startTestTower(store, { clock });
    node = (await t.call('POST', '/nodes', { hostname: `mesh-${store}` })).body as typeof node;
    domainId = ((await t.call('POST', '/domains', { name: 'mesh' })).body as { id: string }).id;
    missionId = ((await t.call('POST', `/domains/${domainId}/m`, { name: 'work' })).body as { id: string })
      .id;
  });
  afterAll(async () => {
    await t?.close();
  });

  const enroll = async (caps: string[] = [], domain = domainId) => {
    const r = await t.call(
      'POST',
      '/agents',
      { domain_id: domain, runtime: 'beta_cli', capabilities: caps },
      node.jwt,
    );
    expect(r.status).toBe(201);
    return r.body as { id: string };
  };
  const submit = async (body: Record<string, unknown>, mission = missionId) =>
    t.call('POST', `/work/missions/${mission}/tasks`, { title: 'job', ...body });
  const mcp = async (tool: string, args: Record<string, unknown>, token: string | undefined = node.jwt) =>
    t.call('POST', '/mcp/call', { tool, args }, token);
  const claim = async (agentId: string) =>
    (await mcp('claim_mesh_task', { agent_id: agentId, mission_id: missionId })).body.result as Claim | null;
  /** Claims until nothing is left, so earlier tests' tasks do not leak into later ones. */
  const drain = async (agentId: string) => {
    for (let c = await claim(agentId); c; c = await claim(agentId)) {
      await mcp('complete_mesh_task', { task_id: c.task.id, lease_id: c.lease_id });
    }
  };

  it('enrols agents with a node credential only', async () => {
    const a = await enroll(['gpu']);
    expect(a).toMatchObject({
      node_id: node.id,
      domain_id: domainId,
      runtime: 'beta_cli',
      capabilities: ['gpu'],
      status: 'idle',
    });
    const byAdmin = await t.call('POST', '/agents', { domain_id: domainId, runtime: 'beta_cli' });
    expect(byAdmin.status).toBe(403);
    expect((await t.call('GET', `/agents/${a.id}`)).body.id).toBe(a.id);
    expect(
      ((await t.call('GET', `/agents?node_id=${node.id}`)).body.items as unknown[]).length,
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
    expect(c1?.task).toEqual((await t.call('GET', `/work/tasks/${high.id}`)).body);
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
    expect((await t.call('POST', `/work/tasks/${high.id}/retry`)).status).toBe(409);

    const failed = await mcp('fail_mesh_task', {
      task_id: low2.id,
      lease_id: c3?.lease_id,
      reason: 'exit 2',
    });
    expect(failed.body.result).toMatchObject({ state: 'failed', failure_reason: 'exit 2' });
    const retried = await t.call('POST', `/work/tasks/${low2.id}/retry`);
    expect(retried.body).toMatchObject({ state: 'pending', attempt: 2, failure_reason: null });
    const again = await claim(agent.id);
    expect(again?.task).toMatchObject({ id: low2.id, attempt: 2, state: 'claimed' });
    expect(again?.task).toEqual((await t.call('GET', `/work/tasks/${low2.id}`)).body);

    const events = (await loggedEvents(t.tower.ctx.store.db)).filter((e) => e.mission_id === missionId);
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
      expect((await t.call('GET', `/work/tasks/${task.id}`)).body).toEqual(task);
    }
    const createdOf = (await loggedEvents(t.tower.ctx.store.db)).find((e) => {
      const p = JSON.parse(e.payload) as { id?: string; action?: string };
      return p.id === assigned.id && p.action === 'created';
    });
    expect([createdOf?.agent_id, createdOf?.status]).toEqual([gpu.id, 'pending']);
    expect(await claim(plain.id)).toBeNull();
    const claimed = [await claim(gpu.id), await claim(gpu.id)];
    expect(claimed.map((c) => c?.task.id).sort()).toEqual([assigned.id, needsGpu.id].sort());
    for (const c of claimed) {
      expect(c?.task).toEqual((await t.call('GET', `/work/tasks/${c?.task.id}`)).body);
    }
  });

  it('refuses a task assigned to an agent not enrolled in its domain with 404 naming the agent', async () => {
    const otherDomain = ((await t.call('POST', '/domains', { name: 'elsewhere' })).body as { id: string }).id;
    const stranger = await enroll([], otherDomain);
    const before = (await t.call('GET', `/work/missions/${missionId}/tasks?limit=500`)).body.items as Task[];
    for (const agentId of ['ag_nosuchagent', stranger.id]) {
      const r = await submit({ claim_policy: 'assigned', assigned_agent_id: agentId });
      expect([r.status, r.body.code]).toEqual([404, 'agent_not_found']);
      expect(r.body.detail).toBe(
        `agent ${agentId} is not enrolled in domain ${domainId} (the mission's): an assigned task needs an agent that can claim it (see: svc agent list --domain ${domainId})`,
      );
    }
    // Nothing was written: no task, no event.
    const after = (await t.call('GET', `/work/missions/${missionId}/tasks?limit=500`)).body.items as Task[];
    expect(after.map((x) => x.id)).toEqual(before.map((x) => x.id));
    const refused = (await loggedEvents(t.tower.ctx.store.db)).filter(
      (e) => ['ag_nosuchagent', stranger.id].includes(e.agent_id ?? '') && e.payload.includes('"created"'),
    );
    expect(refused).toEqual([]);
  });

  it('returns expired leases to pending and fails a task past max_attempts', async () => {
    const agent = await enroll();
    await drain(agent.id);
    const task = (await submit({ max_attempts: 2, lease_seconds: 10 })).body as unknown as Task;
    const first = await claim(agent.id);
    expect(first?.task.id).toBe(task.id);
    const stateOf = async () =>
      ((await t.call('GET', `/work/tasks/${task.id}`)).body as unknown as Task).state;
    // The sweeper runs every second of the tower's clock: step it until the sweep happened.
    await clock.advance(10_000);
    await waitFor('the sweep', async () => {
      await clock.advance(1000);
      return (await stateOf()) === 'pending';
    });
    expect(((await t.call('GET', `/work/tasks/${task.id}`)).body as unknown as Task).attempt).toBe(2);
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
    expect(((await t.call('GET', `/work/tasks/${task.id}`)).body as unknown as Task).failure_reason).toMatch(
      /lease expired on attempt 2 of 2/,
    );
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
      ((await t.call('GET', `/work/tasks/${task.id}`)).body as unknown as Task).state;
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

  it("writes each transition's event with the same payload on every path", async () => {
    const d = ((await t.call('POST', '/domains', { name: 'payloads' })).body as { id: string }).id;
    const m = ((await t.call('POST', `/domains/${d}/m`, { name: 'p' })).body as { id: string }).id;
    const a = await enroll(['z'], d);
    const title = 'a "quoted" \\ title';
    const task = (await submit({ title }, m)).body as unknown as Task;
    const claimIn = async () =>
      (await mcp('claim_mesh_task', { agent_id: a.id, mission_id: m })).body.result as Claim;
    const c1 = await claimIn();
    await mcp('start_mesh_task', { task_id: task.id, lease_id: c1.lease_id });
    await mcp('fail_mesh_task', { task_id: task.id, lease_id: c1.lease_id, reason: 'no "luck"' });
    await t.call('POST', `/work/tasks/${task.id}/retry`);
    const c2 = await claimIn();
    await mcp('complete_mesh_tasks', { items: [{ task_id: task.id, lease_id: c2.lease_id }] });
    const parent = (await submit({ claim_policy: 'broadcast', required_capabilities: ['z'] }, m))
      .body as unknown as Task;
    const run = await claimIn();
    await mcp('fail_mesh_task', { task_id: run.task.id, lease_id: run.lease_id, reason: 'late' });

    const events = (await loggedEvents(t.tower.ctx.store.db)).filter(
      (e) => e.mission_id === m && e.type === 'matrix',
    );
    const of = (id: string) =>
      events
        .filter((e) => (JSON.parse(e.payload) as { id?: string }).id === id)
        .map((e) => [e.domain_id, e.agent_id, e.status, e.payload]);
    const p = (action: string, state: string, attempt: number, more = '') =>
      `{"entity":"mesh_task","action":"${action}","id":"${task.id}","title":${JSON.stringify(title)},"state":"${state}","attempt":${attempt}${more}}`;
    expect(of(task.id)).toEqual([
      [d, null, 'pending', p('created', 'pending', 1)],
      [d, a.id, 'claimed', p('claimed', 'claimed', 1)],
      [d, a.id, 'running', p('started', 'running', 1)],
      [d, a.id, 'failed', p('failed', 'failed', 1, ',"reason":"no \\"luck\\""')],
      [d, null, 'pending', p('retried', 'pending', 2)],
      [d, a.id, 'claimed', p('claimed', 'claimed', 2)],
      [d, a.id, 'completed', p('completed', 'completed', 2)],
    ]);
    // A broadcast run's events carry its parent.
    expect(of(run.task.id).map((e) => JSON.parse(e[3] as string))).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ action: 'claimed', parent_id: parent.id }),
        expect.objectContaining({ action: 'failed', reason: 'late', parent_id: parent.id }),
      ]),
    );
    expect(JSON.parse(of(run.task.id).find((e) => e[2] === 'claimed')?.[3] as string)).toEqual({
      entity: 'mesh_task',
      action: 'claimed',
      id: run.task.id,
      title: 'job',
      state: 'claimed',
      attempt: 1,
      parent_id: parent.id,
    });
  });

  it('runs a broadcast task once per eligible agent', async () => {
    const d = ((await t.call('POST', '/domains', { name: 'bcast' })).body as { id: string }).id;
    const m = ((await t.call('POST', `/domains/${d}/m`, { name: 'b' })).body as { id: string }).id;
    const a1 = await enroll(['x'], d);
    const a2 = await enroll(['x'], d);
    await enroll([], d);
    const parent = (await submit({ claim_policy: 'broadcast', required_capabilities: ['x'] }, m))
      .body as unknown as Task;
    const runs = ((await t.call('GET', `/work/missions/${m}/tasks`)).body.items as Task[]).filter(
      (x) => x.parent_id === parent.id,
    );
    expect(runs.length).toBe(2);
    for (const a of [a1, a2]) {
      const c = (await mcp('claim_mesh_task', { agent_id: a.id })).body.result as Claim;
      expect(c.task.parent_id).toBe(parent.id);
      expect((await mcp('claim_mesh_task', { agent_id: a.id })).body.result).toBeNull();
      await mcp('complete_mesh_task', { task_id: c.task.id, lease_id: c.lease_id });
    }
    expect(((await t.call('GET', `/work/tasks/${parent.id}`)).body as unknown as Task).state).toBe(
      'completed',
    );
  });

  it('refuses a broadcast task no enrolled agent could run, writing nothing', async () => {
    const d = ((await t.call('POST', '/domains', { name: 'bnone' })).body as { id: string }).id;
    const m = ((await t.call('POST', `/domains/${d}/m`, { name: 'b' })).body as { id: string }).id;
    await enroll(['x'], d);
    const r = await submit({ claim_policy: 'broadcast', required_capabilities: ['y'] }, m);
    expect([r.status, r.body.code]).toEqual([409, 'conflict']);
    expect((await t.call('GET', `/work/missions/${m}/tasks`)).body.items).toEqual([]);
  });

  it('retries the failed runs of a failed broadcast, and reopens the broadcast when one run is retried', async () => {
    const d = ((await t.call('POST', '/domains', { name: 'bretry' })).body as { id: string }).id;
    const m = ((await t.call('POST', `/domains/${d}/m`, { name: 'b' })).body as { id: string }).id;
    const agents = [await enroll([], d), await enroll([], d), await enroll([], d)];
    const parent = (await submit({ claim_policy: 'broadcast' }, m)).body as unknown as Task;
    const get = async (id: string) => (await t.call('GET', `/work/tasks/${id}`)).body as unknown as Task;
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
    const r1 = await t.call('POST', `/work/tasks/${bad1.task.id}/retry`);
    expect(r1.body).toMatchObject({ state: 'pending', attempt: 2 });
    expect((await get(parent.id)).state).toBe('pending');
    const again = await runOf(agents[1]?.id ?? '');
    expect(again.task.id).toBe(bad1.task.id);
    await mcp('fail_mesh_task', { task_id: bad1.task.id, lease_id: again.lease_id, reason: 'a2' });
    expect((await get(parent.id)).state).toBe('failed');

    // Retrying the broadcast retries both failed runs (not the completed one); it completes
    // when they do.
    const r2 = await t.call('POST', `/work/tasks/${parent.id}/retry`);
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
    expect((await t.call('POST', `/work/tasks/${parent.id}/retry`)).status).toBe(409);
  });

  it('does not retry a broadcast whose unfinished runs were cancelled, nor a run of a cancelled broadcast', async () => {
    const d = ((await t.call('POST', '/domains', { name: 'bcancel' })).body as { id: string }).id;
    const m = ((await t.call('POST', `/domains/${d}/m`, { name: 'b' })).body as { id: string }).id;
    const [a1, a2] = [await enroll([], d), await enroll([], d)];
    const parent = (await submit({ claim_policy: 'broadcast' }, m)).body as unknown as Task;
    const c1 = (await mcp('claim_mesh_task', { agent_id: a1.id })).body.result as Claim;
    await mcp('fail_mesh_task', { task_id: c1.task.id, lease_id: c1.lease_id, reason: 'x' });
    expect((await t.call('POST', `/work/tasks/${parent.id}/cancel`)).body.state).toBe('cancelled');
    const r = await t.call('POST', `/work/tasks/${c1.task.id}/retry`);
    expect([r.status, r.body.code]).toEqual([409, 'illegal_transition']);
    const runs = ((await t.call('GET', `/work/missions/${m}/tasks`)).body.items as Task[])
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
      ((await t.call('GET', `/work/missions/${m}/tasks`)).body.items as Task[]).find(
        (x) => x.parent_id === p2.id && x.id !== c2.task.id,
      ) as Task
    ).id;
    expect((await t.call('POST', `/work/tasks/${other}/cancel`)).body.state).toBe('cancelled');
    expect(((await t.call('GET', `/work/tasks/${p2.id}`)).body as unknown as Task).state).toBe('failed');
    const r2 = await t.call('POST', `/work/tasks/${p2.id}/retry`);
    expect([r2.status, r2.body.code]).toEqual([409, 'illegal_transition']);
  });

  it('settles a broadcast once when its runs end at the same moment', async () => {
    const d = ((await t.call('POST', '/domains', { name: 'bsettle' })).body as { id: string }).id;
    const m = ((await t.call('POST', `/domains/${d}/m`, { name: 'b' })).body as { id: string }).id;
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
      expect([id, ((await t.call('GET', `/work/tasks/${id}`)).body as unknown as Task).state]).toEqual([
        id,
        'completed',
      ]);
    }
  });

  it("lists a mission's tasks by state, a page at a time, and refuses an unknown state", async () => {
    const d = ((await t.call('POST', '/domains', { name: 'lists' })).body as { id: string }).id;
    const m = ((await t.call('POST', `/domains/${d}/m`, { name: 'l' })).body as { id: string }).id;
    const agent = await enroll([], d);
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) ids.push(((await submit({ title: `l${i}` }, m)).body as unknown as Task).id);
    const c = (await mcp('claim_mesh_task', { agent_id: agent.id, mission_id: m })).body.result as Claim;
    await mcp('complete_mesh_task', { task_id: c.task.id, lease_id: c.lease_id });
    await t.call('POST', `/work/tasks/${ids[4]}/cancel`);
    const list = async (q: string) => (await t.call('GET', `/work/missions/${m}/tasks?${q}`)).body;
    const idsOf = (b: Record<string, unknown>) => (b.items as Task[]).map((x) => x.id);

    expect(idsOf(await list('state=completed'))).toEqual([c.task.id]);
    expect(idsOf(await list('state=cancelled'))).toEqual([ids[4]]);
    const pending = ids.filter((id) => id !== c.task.id && id !== ids[4]);
    const first = await list('state=pending&limit=2');
    expect(idsOf(first)).toEqual(pending.slice(0, 2));
    const second = await list(
      `state=pending&limit=2&cursor=${encodeURIComponent(String(first.next_cursor))}`,
    );
    expect(idsOf(second)).toEqual(pending.slice(2));
    expect(second.next_cursor).toBeNull();
    expect(idsOf(await list('limit=500'))).toEqual(ids);
    const bad = await t.call('GET', `/work/missions/${m}/tasks?state=done`);
    expect([bad.status, bad.body.code]).toEqual([400, 'validation_failed']);
    expect((await t.call('GET', '/work/missions/mis_nope/tasks')).status).toBe(404);
  });

  it('refuses a task in a mission it cannot see, writing nothing', async () => {
    const count = async () =>
      Number(
        (
          await t.tower.ctx.store.db
            .selectFrom('mesh_tasks')
            .select((eb) => eb.fn.countAll<string>().as('n'))
            .executeTakeFirstOrThrow()
        ).n,
      );
    const events = async () => (await loggedEvents(t.tower.ctx.store.db)).length;
    const [tasks0, events0] = [await count(), await events()];
    const nope = await t.call('POST', '/work/missions/mis_nope/tasks', { title: 'lost' });
    expect([nope.status, nope.body.code]).toEqual([404, 'not_found']);
    // A token for another domain does not see this one's missions.
    const otherDomain = ((await t.call('POST', '/domains', { name: 'elsewhere' })).body as { id: string }).id;
    const scoped = (
      await t.call('POST', '/tokens', { name: 'other', scopes: ['work:write'], domains: [otherDomain] })
    ).body.token as string;
    const hidden = await t.call('POST', `/work/missions/${missionId}/tasks`, { title: 'hidden' }, scoped);
    expect([hidden.status, hidden.body.code]).toEqual([404, 'not_found']);
    expect([await count(), await events()]).toEqual([tasks0, events0 + 1]); // the domain's own event
    const mine = await t.call('POST', `/work/missions/${missionId}/tasks`, { title: 'seen', priority: -5 });
    expect(mine.status).toBe(201);
    expect(mine.body).toMatchObject({
      mission_id: missionId,
      domain_id: domainId,
      title: 'seen',
      state: 'pending',
      priority: -5,
    });
    expect((await t.call('GET', `/work/tasks/${mine.body.id}`)).body).toEqual(mine.body);
    expect(await t.call('POST', `/work/tasks/${mine.body.id}/cancel`).then((r) => r.status)).toBe(200);
  });

  it('cancels once; a cancelled task is not claimable', async () => {
    const agent = await enroll();
    await drain(agent.id);
    const task = (await submit({})).body as unknown as Task;
    expect((await t.call('POST', `/work/tasks/${task.id}/cancel`)).body.state).toBe('cancelled');
    expect((await t.call('POST', `/work/tasks/${task.id}/cancel`)).status).toBe(409);
    expect(await claim(agent.id)).toBeNull();
  });

  it('gives each task to exactly one of many concurrent claimers', async () => {
    const d = ((await t.call('POST', '/domains', { name: 'race' })).body as { id: string }).id;
    const m = ((await t.call('POST', `/domains/${d}/m`, { name: 'r' })).body as { id: string }).id;
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
    const d = ((await t.call('POST', '/domains', { name: 'batch' })).body as { id: string }).id;
    const m = ((await t.call('POST', `/domains/${d}/m`, { name: 'b' })).body as { id: string }).id;
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
      const got = (await t.call('GET', `/work/tasks/${c.task.id}`)).body as unknown as Task & {
        result: unknown;
      };
      expect(got).toMatchObject({ state: 'completed', result: { n: c.task.id } });
    }
    const unknown = await mcp('complete_mesh_task', { task_id: 'mt_nope', lease_id: 'lease_x' });
    expect(unknown.status).toBe(404);
    expect(((await t.call('GET', `/work/tasks/${notMine}`)).body as unknown as Task).state).toBe('pending');

    // Insertion order: the id on both stores (given at insert).
    const events = (await loggedEvents(t.tower.ctx.store.db)).filter((e) => e.mission_id === m);
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
    const d = ((await t.call('POST', '/domains', { name: 'cmany' })).body as { id: string }).id;
    const m = ((await t.call('POST', `/domains/${d}/m`, { name: 'c' })).body as { id: string }).id;
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
    const done = (await t.call('GET', `/work/tasks/${a.task.id}`)).body as unknown as Task;
    expect(done).toMatchObject({ state: 'completed', result: { i: 0 }, updated_at: items[0]?.updated_at });
    expect(((await t.call('GET', `/work/tasks/${b.task.id}`)).body as unknown as Task).state).toBe('claimed');
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

  it('validates tool arguments against the schema pack', async () => {
    const bad = await mcp('claim_mesh_task', { agent_id: 5 });
    expect(bad.status).toBe(400);
    expect(JSON.stringify(bad.body)).toContain('args/agent_id');
    expect((await mcp('no_such_tool', {})).status).toBe(404);
    const other = await mcp('claim_mesh_task', { agent_id: 'ag_nope' });
    expect(other.body.code).toBe('agent_not_found');
    const listed = await mcp('list_mesh_tasks', { mission_id: missionId, state: 'completed' });
    expect((listed.body.result as { items: Task[] }).items.length).toBeGreaterThan(0);
  });

  it("creates and reads records through the record tools, with the caller's own scopes", async () => {
    const mission = await mcp('create_mission', { domain_id: domainId, name: 'via mcp' });
    expect(mission.status).toBe(200);
    const m = mission.body.result as { id: string; domain_id: string; name: string };
    expect(m).toMatchObject({ domain_id: domainId, name: 'via mcp' });
    const doc = await mcp('create_document', {
      domain_id: domainId,
      mission_id: m.id,
      title: 'notes',
      content: 'hello',
    });
    const d = doc.body.result as { id: string; content: string };
    expect(d.content).toBe('hello');
    const art = await mcp('create_artifact', { domain_id: domainId, mission_id: m.id, name: 'out.tar' });
    const a = art.body.result as { id: string };
    expect(
      (await mcp('get_document', { domain_id: domainId, mission_id: m.id, document_id: d.id })).body.result,
    ).toMatchObject({ id: d.id, title: 'notes' });
    expect(
      (await mcp('get_artifact', { domain_id: domainId, mission_id: m.id, artifact_id: a.id })).body.result,
    ).toMatchObject({ id: a.id, name: 'out.tar' });
    expect((await mcp('get_mission', { domain_id: domainId, mission_id: m.id })).body.result).toMatchObject({
      id: m.id,
    });
    expect((await mcp('get_domain', { domain_id: domainId })).body.result).toMatchObject({ id: domainId });
    // A node's credential stops at work:write: creating a domain needs admin.
    expect((await mcp('create_domain', { name: 'nope' })).status).toBe(403);
    const byAdmin = await mcp('create_domain', { name: 'by admin' }, t.adminToken);
    expect(byAdmin.body.result).toMatchObject({ name: 'by admin' });
    expect((await mcp('create_document', { domain_id: domainId, mission_id: m.id, title: 'x' })).status).toBe(
      400,
    );
  });
});
