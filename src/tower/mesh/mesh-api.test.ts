// The mesh area's events, lists and tools on both stores: one event payload on every path,
// paged lists, missions a caller cannot see, the start's mission settings, tool arguments and
// the record tools.
import { describe, expect, it } from 'vitest';
import { loggedEvents } from '../../../test/support/events.js';
import { type Claim, type Task, useMeshWorld } from '../../../test/support/mesh-tower.js';
import { STORES } from '../../../test/support/tower.js';

describe.each(STORES)('mesh events, lists and tools on %s', (store) => {
  const w = useMeshWorld(store);
  const { enroll, submit, mcp } = w;

  it("writes each transition's event with the same payload on every path", async () => {
    const d = ((await w.t.call('POST', '/domains', { name: 'payloads' })).body as { id: string }).id;
    const m = ((await w.t.call('POST', `/domains/${d}/m`, { name: 'p' })).body as { id: string }).id;
    const a = await enroll(['z'], d);
    const title = 'a "quoted" \\ title';
    const task = (await submit({ title }, m)).body as unknown as Task;
    const claimIn = async () =>
      (await mcp('claim_mesh_task', { agent_id: a.id, mission_id: m })).body.result as Claim;
    const c1 = await claimIn();
    await mcp('start_mesh_task', { task_id: task.id, lease_id: c1.lease_id });
    await mcp('fail_mesh_task', { task_id: task.id, lease_id: c1.lease_id, reason: 'no "luck"' });
    await w.t.call('POST', `/work/tasks/${task.id}/retry`);
    const c2 = await claimIn();
    await mcp('complete_mesh_tasks', { items: [{ task_id: task.id, lease_id: c2.lease_id }] });
    const parent = (await submit({ claim_policy: 'broadcast', required_capabilities: ['z'] }, m))
      .body as unknown as Task;
    const run = await claimIn();
    await mcp('fail_mesh_task', { task_id: run.task.id, lease_id: run.lease_id, reason: 'late' });

    const events = (await loggedEvents(w.t.tower.store.db)).filter(
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

  it("lists a mission's tasks by state, a page at a time, and refuses an unknown state", async () => {
    const d = ((await w.t.call('POST', '/domains', { name: 'lists' })).body as { id: string }).id;
    const m = ((await w.t.call('POST', `/domains/${d}/m`, { name: 'l' })).body as { id: string }).id;
    const agent = await enroll([], d);
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) ids.push(((await submit({ title: `l${i}` }, m)).body as unknown as Task).id);
    const c = (await mcp('claim_mesh_task', { agent_id: agent.id, mission_id: m })).body.result as Claim;
    await mcp('complete_mesh_task', { task_id: c.task.id, lease_id: c.lease_id });
    await w.t.call('POST', `/work/tasks/${ids[4]}/cancel`);
    const list = async (q: string) => (await w.t.call('GET', `/work/missions/${m}/tasks?${q}`)).body;
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
    const bad = await w.t.call('GET', `/work/missions/${m}/tasks?state=done`);
    expect([bad.status, bad.body.code]).toEqual([400, 'validation_failed']);
    expect((await w.t.call('GET', '/work/missions/mis_nope/tasks')).status).toBe(404);
  });

  it('refuses a task in a mission it cannot see, writing nothing', async () => {
    const count = async () =>
      Number(
        (
          await w.t.tower.store.db
            .selectFrom('mesh_tasks')
            .select((eb) => eb.fn.countAll<string>().as('n'))
            .executeTakeFirstOrThrow()
        ).n,
      );
    const events = async () => (await loggedEvents(w.t.tower.store.db)).length;
    const [tasks0, events0] = [await count(), await events()];
    const nope = await w.t.call('POST', '/work/missions/mis_nope/tasks', { title: 'lost' });
    expect([nope.status, nope.body.code]).toEqual([404, 'not_found']);
    // A token for another domain does not see this one's missions.
    const otherDomain = ((await w.t.call('POST', '/domains', { name: 'elsewhere' })).body as { id: string })
      .id;
    const scoped = (
      await w.t.call('POST', '/tokens', { name: 'other', scopes: ['work:write'], domains: [otherDomain] })
    ).body.token as string;
    const hidden = await w.t.call('POST', `/work/missions/${w.missionId}/tasks`, { title: 'hidden' }, scoped);
    expect([hidden.status, hidden.body.code]).toEqual([404, 'not_found']);
    expect([await count(), await events()]).toEqual([tasks0, events0 + 1]); // the domain's own event
    const mine = await w.t.call('POST', `/work/missions/${w.missionId}/tasks`, {
      title: 'seen',
      priority: -5,
    });
    expect(mine.status).toBe(201);
    expect(mine.body).toMatchObject({
      mission_id: w.missionId,
      domain_id: w.domainId,
      title: 'seen',
      state: 'pending',
      priority: -5,
    });
    expect((await w.t.call('GET', `/work/tasks/${mine.body.id}`)).body).toEqual(mine.body);
    expect(await w.t.call('POST', `/work/tasks/${mine.body.id}/cancel`).then((r) => r.status)).toBe(200);
  });

  it("answers a start with the mission's repository and policy as they are at that start", async () => {
    const d = ((await w.t.call('POST', '/domains', { name: 'settings' })).body as { id: string }).id;
    const m = ((await w.t.call('POST', `/domains/${d}/m`, { name: 's' })).body as { id: string }).id;
    const agent = await enroll([], d);
    const startNext = async () => {
      await submit({ title: 'run' }, m);
      const c = (await mcp('claim_mesh_task', { agent_id: agent.id, mission_id: m })).body.result as Claim;
      const started = (await mcp('start_mesh_task', { task_id: c.task.id, lease_id: c.lease_id })).body
        .result as Task & { mission: unknown };
      expect(started).toMatchObject({ id: c.task.id, state: 'running' });
      // Starting again (a retried start) answers the same.
      const again = await mcp('start_mesh_task', { task_id: c.task.id, lease_id: c.lease_id });
      expect((again.body.result as { mission: unknown }).mission).toEqual(started.mission);
      await mcp('complete_mesh_task', { task_id: c.task.id, lease_id: c.lease_id });
      return started.mission;
    };
    expect(await startNext()).toEqual({ repository: null, agent_policy: null });
    const policy = { preset: 'allow_all', rules: [{ kind: ['fetch'], action: 'deny' }] };
    await w.t.call('PATCH', `/domains/${d}/m/${m}`, { repository: '/srv/repo', agent_policy: policy });
    expect(await startNext()).toEqual({ repository: '/srv/repo', agent_policy: policy });
    const tighter = { rules: [{ kind: ['execute'], action: 'ask' }] };
    await w.t.call('PATCH', `/domains/${d}/m/${m}`, { agent_policy: tighter });
    expect(await startNext()).toEqual({ repository: '/srv/repo', agent_policy: tighter });
  });

  it('validates tool arguments against the schema pack', async () => {
    const bad = await mcp('claim_mesh_task', { agent_id: 5 });
    expect(bad.status).toBe(400);
    expect(JSON.stringify(bad.body)).toContain('args/agent_id');
    expect((await mcp('no_such_tool', {})).status).toBe(404);
    const other = await mcp('claim_mesh_task', { agent_id: 'ag_nope' });
    expect(other.body.code).toBe('agent_not_found');
    const agent = await enroll();
    await submit({ title: 'listed' });
    const c = (await mcp('claim_mesh_task', { agent_id: agent.id, mission_id: w.missionId })).body
      .result as Claim;
    await mcp('complete_mesh_task', { task_id: c.task.id, lease_id: c.lease_id });
    const listed = await mcp('list_mesh_tasks', { mission_id: w.missionId, state: 'completed' });
    expect((listed.body.result as { items: Task[] }).items.map((x) => x.id)).toEqual([c.task.id]);
  });

  it("creates and reads records through the record tools, with the caller's own scopes", async () => {
    const mission = await mcp('create_mission', { domain_id: w.domainId, name: 'via mcp' });
    expect(mission.status).toBe(200);
    const m = mission.body.result as { id: string; domain_id: string; name: string };
    expect(m).toMatchObject({ domain_id: w.domainId, name: 'via mcp' });
    const doc = await mcp('create_document', {
      domain_id: w.domainId,
      mission_id: m.id,
      title: 'notes',
      content: 'hello',
    });
    const d = doc.body.result as { id: string; content: string };
    expect(d.content).toBe('hello');
    const art = await mcp('create_artifact', { domain_id: w.domainId, mission_id: m.id, name: 'out.tar' });
    const a = art.body.result as { id: string };
    expect(
      (await mcp('get_document', { domain_id: w.domainId, mission_id: m.id, document_id: d.id })).body.result,
    ).toMatchObject({ id: d.id, title: 'notes' });
    expect(
      (await mcp('get_artifact', { domain_id: w.domainId, mission_id: m.id, artifact_id: a.id })).body.result,
    ).toMatchObject({ id: a.id, name: 'out.tar' });
    expect((await mcp('get_mission', { domain_id: w.domainId, mission_id: m.id })).body.result).toMatchObject(
      {
        id: m.id,
      },
    );
    expect((await mcp('get_domain', { domain_id: w.domainId })).body.result).toMatchObject({
      id: w.domainId,
    });
    // A node's credential stops at work:write: creating a domain needs admin.
    expect((await mcp('create_domain', { name: 'nope' })).status).toBe(403);
    const byAdmin = await mcp('create_domain', { name: 'by admin' }, w.t.adminToken);
    expect(byAdmin.body.result).toMatchObject({ name: 'by admin' });
    expect(
      (await mcp('create_document', { domain_id: w.domainId, mission_id: m.id, title: 'x' })).status,
    ).toBe(400);
  });
});
