// On PostgreSQL a batch transition stores its events as one block row (feed/migrations.ts
// version 12). Readers see one event per id all the same: live, resumed from inside a block,
// and at the edges (the newest id is a block's last; beyond it is unknown).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loggedEvents, startFeedHub } from '../../../test/support/events.js';
import { waitFor } from '../../../test/support/poll.js';
import { startTestTower, type TestTower } from '../../../test/support/tower.js';
import { FakeClock } from '../../lib/clock.js';
import type { FeedEvent } from '../../protocol/events.js';
import type { Principal } from '../auth/principal.js';
import { EVENT_BLOCK_MAX } from '../store/event-blocks.js';
import type { FeedHub, ResetInfo, SubscriberSink } from './hub.js';

const admin: Principal = {
  kind: 'token',
  id: 'admin',
  name: 'admin',
  scopes: ['feed:read'],
  domains: null,
  expiresAt: null,
};

function sink(): SubscriberSink & { events: FeedEvent[]; resets: ResetInfo[] } {
  const events: FeedEvent[] = [];
  const resets: ResetInfo[] = [];
  return {
    events,
    resets,
    deliver: (evs) => {
      events.push(...evs);
      return true;
    },
    reset: (info) => resets.push(info),
    closed: () => {},
  };
}

const action = (e: FeedEvent) => `${String(e.payload.action)}:${String(e.payload.id)}`;
const ofTasks = (events: FeedEvent[]) => events.filter((e) => e.payload.entity === 'mesh_task');

describe('event blocks on postgres', () => {
  let t: TestTower;
  let hub: FeedHub;
  let live: ReturnType<typeof sink>;
  let taskIds: string[];
  let agentId: string;
  let mcp: (tool: string, args: Record<string, unknown>) => ReturnType<TestTower['call']>;
  let missionId: string;

  beforeAll(async () => {
    t = await startTestTower('postgres');
    hub = await startFeedHub(t.tower);
    live = sink();
    await hub.subscribe(admin, { types: ['matrix'] }, null, live);

    const node = (await t.call('POST', '/nodes', { hostname: 'blocks' })).body as { jwt: string };
    const domainId = ((await t.call('POST', '/domains', { name: 'blocks' })).body as { id: string }).id;
    missionId = ((await t.call('POST', `/domains/${domainId}/m`, { name: 'b' })).body as { id: string }).id;
    const agent = (
      await t.call(
        'POST',
        '/agents',
        { domain_id: domainId, runtime: 'beta_cli', capabilities: [] },
        node.jwt,
      )
    ).body as { id: string };
    agentId = agent.id;
    taskIds = [];
    for (let i = 0; i < 5; i++) {
      const r = await t.call('POST', `/work/missions/${missionId}/tasks`, { title: `t${i}` });
      taskIds.push((r.body as { id: string }).id);
    }
    mcp = (tool, args) => t.call('POST', '/mcp/call', { tool, args }, node.jwt);
    const claimed = (await mcp('claim_mesh_tasks', { agent_id: agent.id, max: 5 })).body.result as {
      items: { task: { id: string }; lease_id: string }[];
    };
    expect(claimed.items).toHaveLength(5);
    const done = await mcp('complete_mesh_tasks', {
      items: claimed.items.map((c) => ({ task_id: c.task.id, lease_id: c.lease_id })),
    });
    expect(done.status).toBe(200);
    taskIds.sort();
  });
  afterAll(async () => {
    await hub?.stop();
    await t?.close();
  });

  it('stores a batch claim and a batch completion as one row each, ids stepping past them', async () => {
    const rows = await t.tower.store.db
      .selectFrom('events')
      .select(['id', 'n', 'payload'])
      .where('type', '=', 'matrix')
      .orderBy('id')
      .execute()
      .then((rs) => rs.filter((r) => r.n !== null || r.payload.includes('"mesh_task"')));
    // Five creations (a block of one each: a creation is one statement too), then the
    // claim's block and the completion's block.
    expect(rows.map((r) => r.n)).toEqual([1, 1, 1, 1, 1, 5, 5]);
    const ids = rows.map((r) => Number(r.id));
    for (let i = 1; i < ids.length; i++) {
      expect((ids[i] as number) - (ids[i - 1] as number)).toBeGreaterThanOrEqual(EVENT_BLOCK_MAX);
    }
    const logged = (await loggedEvents(t.tower.store.db)).filter((e) => e.payload.includes('"mesh_task"'));
    expect(logged).toHaveLength(15);
    const claimBase = BigInt(rows[5]?.id ?? 0);
    expect(logged.slice(5, 10).map((e) => BigInt(e.id))).toEqual(
      [0n, 1n, 2n, 3n, 4n].map((i) => claimBase + i),
    );
  });

  it('delivers every event of a block live, one per id, in task id order', async () => {
    await waitFor('the live subscriber to get all 15 events', () => ofTasks(live.events).length >= 15);
    const tasks = ofTasks(live.events);
    expect(tasks.map(action)).toEqual([
      ...taskIds.map((id) => `created:${id}`),
      ...taskIds.map((id) => `claimed:${id}`),
      ...taskIds.map((id) => `completed:${id}`),
    ]);
    const claimedEv = tasks[5] as FeedEvent;
    expect(claimedEv).toMatchObject({ type: 'matrix', status: 'claimed' });
    expect(claimedEv.domain_id).toBe(tasks[0]?.domain_id);
    expect(claimedEv.mission_id).toBe(tasks[0]?.mission_id);
    expect(claimedEv.agent_id).toBe(agentId);
    expect(claimedEv.payload).toEqual({
      entity: 'mesh_task',
      action: 'claimed',
      id: taskIds[0],
      title: expect.any(String),
      state: 'claimed',
      attempt: 1,
    });
    const ids = live.events.map((e) => BigInt(e.id));
    expect(ids).toEqual([...ids].sort((a, b) => (a < b ? -1 : 1)));
    expect(new Set(ids).size).toBe(ids.length);
  });

  it('resumes from inside a block with the rest of it, exactly once', async () => {
    const all = live.events;
    const first = all.length - 15;
    for (const from of [0, 5, 6, 8, 9, 12, 14].map((i) => first + i)) {
      const s = sink();
      const sub = await hub.subscribe(admin, { types: ['matrix'] }, BigInt(all[from]?.id ?? 0), s);
      expect(s.resets).toEqual([]);
      expect(s.events.map((e) => e.id)).toEqual(all.slice(from + 1).map((e) => e.id));
      sub.close();
    }
  });

  it('knows the newest id is the last of the newest block', async () => {
    const last = BigInt(live.events[live.events.length - 1]?.id ?? 0);
    const atEnd = sink();
    (await hub.subscribe(admin, {}, last, atEnd)).close();
    expect(atEnd.resets).toEqual([]);
    expect(atEnd.events).toEqual([]);
    const beyond = sink();
    (await hub.subscribe(admin, {}, last + 1n, beyond)).close();
    expect(beyond.resets).toEqual([
      { reason: 'unknown', last_event_id: String(last + 1n), resume_after: String(last) },
    ]);
  });

  it('escapes free text in a block: titles and failure reasons come out as they went in', async () => {
    const title = 'say "hi"\\ then\n\ttab, ü, \u2028 and </script>';
    const reason = 'exit 1: "quoted"\\path\nnext line';
    const created = (await t.call('POST', `/work/missions/${missionId}/tasks`, { title })).body as {
      id: string;
    };
    const claimed = (await mcp('claim_mesh_tasks', { agent_id: agentId, max: 5 })).body.result as {
      items: { task: { id: string }; lease_id: string }[];
    };
    expect(claimed.items.map((c) => c.task.id)).toEqual([created.id]);
    const failed = await mcp('fail_mesh_task', {
      task_id: created.id,
      lease_id: claimed.items[0]?.lease_id,
      reason,
    });
    expect(failed.status).toBe(200);
    await waitFor('the failure event', () =>
      live.events.some((e) => e.payload.id === created.id && e.payload.action === 'failed'),
    );
    const mine = live.events.filter((e) => e.payload.id === created.id);
    expect(mine.map((e) => e.payload)).toEqual([
      { entity: 'mesh_task', action: 'created', id: created.id, title, state: 'pending', attempt: 1 },
      { entity: 'mesh_task', action: 'claimed', id: created.id, title, state: 'claimed', attempt: 1 },
      { entity: 'mesh_task', action: 'failed', id: created.id, title, state: 'failed', attempt: 1, reason },
    ]);
    const rows = await t.tower.store.db
      .selectFrom('events')
      .select('n')
      .where('payload', 'like', `%${created.id}%`)
      .orderBy('id')
      .execute();
    // The creation, the claim and the failure: a block each, of one.
    expect(rows.map((r) => r.n)).toEqual([1, 1, 1]);
  });
});

// The sequencer publishes a fast statement's events when that statement says it appended
// some (Write.statement's `appended`); its poll is only a backstop. With a clock that never
// moves the poll never fires, so each transition below is readable only through its own kick:
// a claim, a batched completion whose statement returns no rows (every request completed),
// and a lone completion (the single-request statement).
describe('fast mesh statements publish their own events on postgres', () => {
  let t: TestTower;
  afterAll(async () => {
    await t?.close();
  });

  it('makes claims and acknowledged completions readable without the poll', async () => {
    t = await startTestTower('postgres', { clock: new FakeClock(Date.now()) });
    const node = (await t.call('POST', '/nodes', { hostname: 'kick' })).body as { jwt: string };
    const domainId = ((await t.call('POST', '/domains', { name: 'kick' })).body as { id: string }).id;
    const missionId = ((await t.call('POST', `/domains/${domainId}/m`, { name: 'k' })).body as { id: string })
      .id;
    const agent = (await t.call('POST', '/agents', { domain_id: domainId, runtime: 'beta_cli' }, node.jwt))
      .body as { id: string };
    for (let i = 0; i < 3; i++) await t.call('POST', `/work/missions/${missionId}/tasks`, { title: `k${i}` });
    const mcp = (tool: string, args: Record<string, unknown>) =>
      t.call('POST', '/mcp/call', { tool, args }, node.jwt);
    const readable = async (act: string) =>
      (await loggedEvents(t.tower.store.db, 'feed_events')).filter((e) =>
        e.payload.includes(`"action":"${act}"`),
      ).length;

    const claimed = (await mcp('claim_mesh_tasks', { agent_id: agent.id, max: 3 })).body.result as {
      items: { task: { id: string }; lease_id: string }[];
    };
    expect(claimed.items).toHaveLength(3);
    await waitFor('the claims to be readable', async () => (await readable('claimed')) === 3);
    const [a, b, c] = claimed.items.map((x) => ({ task_id: x.task.id, lease_id: x.lease_id }));
    const two = await mcp('complete_mesh_tasks', { items: [a, b] });
    expect((two.body.result as { items: { ok: boolean }[] }).items.map((x) => x.ok)).toEqual([true, true]);
    await waitFor('the batched completions to be readable', async () => (await readable('completed')) === 2);
    const one = await mcp('complete_mesh_tasks', { items: [c] });
    expect((one.body.result as { items: { ok: boolean }[] }).items.map((x) => x.ok)).toEqual([true]);
    await waitFor('the lone completion to be readable', async () => (await readable('completed')) === 3);
  });
});
