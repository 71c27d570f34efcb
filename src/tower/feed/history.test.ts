// GET /events: recent history newest first, paged backwards (through PostgreSQL's blocks
// too), visibility and filters as on the stream, and a `last_event_id` to follow live from.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openStream } from '../../../test/support/feed-stream.js';
import { waitFor } from '../../../test/support/poll.js';
import { meshFixture, STORES, startTestTower, type TestTower } from '../../../test/support/tower.js';
import type { FeedEvent, HistoryPage } from '../../protocol/events.js';

describe.each(STORES)('feed history on %s', (store) => {
  let t: TestTower;
  let base: string;

  beforeAll(async () => {
    t = await startTestTower(store);
    base = await t.tower.listen('127.0.0.1', 0);
  });
  afterAll(async () => {
    await t?.close();
  });

  const page = async (qs: string, token?: string) => {
    const r = await t.call('GET', `/events${qs}`, undefined, token);
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    return r.body as unknown as HistoryPage;
  };
  /** Every page of `qs` (limit `n`), oldest last. */
  const allPages = async (qs: string, n: number) => {
    const out: FeedEvent[] = [];
    let before: string | null = null;
    for (let i = 0; i < 100; i++) {
      const p: HistoryPage = await page(`?limit=${n}${qs}${before ? `&before=${before}` : ''}`);
      out.push(...p.items);
      before = p.next_cursor;
      if (!before) break;
    }
    return out;
  };

  it('pages backwards through every event, each once, the same as a replay from 0', async () => {
    const f = await meshFixture(t, 'history');
    const tasks: string[] = [];
    for (let i = 0; i < 4; i++) {
      const r = await t.call('POST', `/work/missions/${f.missionId}/tasks`, { title: `h${i}` });
      tasks.push((r.body as { id: string }).id);
    }
    // A batch claim and completion: one block row each on PostgreSQL.
    const mcp = (tool: string, args: Record<string, unknown>) =>
      t.call('POST', '/mcp/call', { tool, args }, f.node.jwt);
    const claimed = (await mcp('claim_mesh_tasks', { agent_id: f.agentId, max: 4 })).body.result as {
      items: { task: { id: string }; lease_id: string }[];
    };
    expect(claimed.items).toHaveLength(4);
    const done = await mcp('complete_mesh_tasks', {
      items: claimed.items.map((c) => ({ task_id: c.task.id, lease_id: c.lease_id })),
    });
    expect(done.status, JSON.stringify(done.body)).toBe(200);

    // What a replay from 0 gives (PostgreSQL: once the watermark has passed the last event).
    const replay = openStream(`${base}/events/stream?last_event_id=0&domain_id=${f.domainId}`, t.adminToken);
    // The mission, the agent's enrolment and the tasks' creations, claims and completions.
    const completions = () =>
      replay.got.filter((e) => (e.data.payload as { action?: string }).action === 'completed');
    await waitFor('the four completions in the replay', () => completions().length === 4);
    await replay.close();
    const forward = replay.got.map((e) => e.id);

    const newestFirst = [...forward].reverse();
    for (const n of [1, 3, 5, 50]) {
      const got = await allPages(`&domain_id=${f.domainId}`, n);
      expect(got.map((e) => e.id)).toEqual(newestFirst);
    }
    const first = await page(`?limit=2&domain_id=${f.domainId}`);
    expect(first.items.map((e) => e.payload.action)).toEqual(['completed', 'completed']);
    expect(BigInt(first.last_event_id)).toBeGreaterThanOrEqual(BigInt(first.items[0]?.id ?? 0));

    // One task's events: created, claimed, completed, newest first.
    const one = await page(`?task_id=${tasks[2]}`);
    expect(one.items.map((e) => e.payload.action)).toEqual(['completed', 'claimed', 'created']);
    expect(one.next_cursor).toBeNull();
    const onlyTasks = await page(`?mission_id=${f.missionId}&type=progress`);
    expect(onlyTasks.items).toEqual([]);
  });

  it('shows a limited token only its domains, and refuses a bad cursor', async () => {
    const a = (await t.call('POST', '/domains', { name: 'seen' })).body as { id: string };
    const b = (await t.call('POST', '/domains', { name: 'unseen' })).body as { id: string };
    const tok = (
      await t.call('POST', '/tokens', { name: 'hist-reader', scopes: ['feed:read'], domains: [a.id] })
    ).body as { token: string };
    await waitFor('both domains in the history', async () => {
      const p = await page('?limit=500');
      return p.items.some((e) => e.domain_id === b.id);
    });
    const limited = await page('?limit=500', tok.token);
    expect(limited.items.length).toBeGreaterThan(0);
    expect(limited.items.every((e) => e.domain_id === a.id)).toBe(true);

    const bad = await t.call('GET', '/events?before=abc');
    expect(bad.status).toBe(400);
    const empty = await page('?before=1');
    expect(empty).toMatchObject({ items: [], next_cursor: null });
  });

  it('follows live after last_event_id with nothing between the page and the stream', async () => {
    const d = (await t.call('POST', '/domains', { name: 'then-live' })).body as { id: string };
    await waitFor('the domain event', async () => (await page(`?domain_id=${d.id}`)).items.length === 1);
    const p = await page(`?domain_id=${d.id}`);
    await t.call('POST', `/domains/${d.id}/m`, { name: 'after' });
    const live = openStream(`${base}/events/stream?domain_id=${d.id}`, t.adminToken, {
      'last-event-id': p.last_event_id,
    });
    await waitFor('the mission event', () => live.got.length >= 1);
    expect(live.got.map((e) => e.data.payload)).toEqual([expect.objectContaining({ name: 'after' })]);
    await live.close();
  });
});
