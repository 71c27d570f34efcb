// PostgreSQL: a lease-holding change (postgres/leased.ts leasedText) does not lock its rows before
// updating them, so a row another transaction changes after the statement's snapshot is
// rechecked on its newest version. These tests hold such a change open on a task while a
// completion of it runs, then commit it: the completion must go by the row as it is now (the
// lease still held: completed once; the lease gone: stale_lease, nothing changed).

import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loggedEvents } from '../../../test/support/events.js';
import { waitFor } from '../../../test/support/poll.js';
import { meshFixture, startTestTower, type TestTower } from '../../../test/support/tower.js';
import { FakeClock } from '../../lib/clock.js';
import { parsePostgresUrl } from '../store/open.js';

interface Claim {
  task: { id: string };
  lease_id: string;
}

describe('a lease-holding change racing another transaction on postgres', () => {
  let t: TestTower;
  let db: pg.Client;
  let node: { jwt: string };
  let agentId: string;
  let missionId: string;
  const clock = new FakeClock(Date.parse('2026-11-24T10:00:00Z'));

  beforeAll(async () => {
    t = await startTestTower('postgres', { clock });
    ({ node, missionId, agentId } = await meshFixture(t, 'race'));
    db = new pg.Client(parsePostgresUrl(t.databaseUrl as string).config);
    await db.connect();
  });
  afterAll(async () => {
    await db?.end();
    await t?.close();
  });

  const mcp = async (tool: string, args: Record<string, unknown>) =>
    t.call('POST', '/mcp/call', { tool, args }, node.jwt);

  /** `n` new tasks, claimed. */
  async function claimed(n: number): Promise<Claim[]> {
    for (let i = 0; i < n; i++) {
      expect((await t.call('POST', `/work/missions/${missionId}/tasks`, { title: `race ${i}` })).status).toBe(
        201,
      );
    }
    const r = await mcp('claim_mesh_tasks', { agent_id: agentId, mission_id: missionId, max: n });
    const items = (r.body.result as { items: Claim[] }).items;
    expect(items).toHaveLength(n);
    return items;
  }

  /**
   * Runs `change` on the task's row in a transaction of its own, starts `complete` while that
   * transaction holds the row, waits until the completion's statement waits for it, commits,
   * and returns what the completion answered.
   */
  async function racing<T>(taskId: string, change: string, complete: () => Promise<T>): Promise<T> {
    await db.query('begin');
    await db.query(change, [taskId]);
    const answer = complete();
    await waitFor('the completion to wait for the open transaction', async () => {
      const r = await db.query(
        `select count(*)::int as n from pg_stat_activity
         where wait_event_type = 'Lock' and query like '%update mesh_tasks t set%'`,
      );
      return r.rows[0].n > 0;
    });
    await db.query('commit');
    return answer;
  }

  const completedEvents = async (taskId: string) =>
    (await loggedEvents(t.tower.store.db)).filter((e) => {
      const p = JSON.parse(e.payload) as { entity?: string; action?: string; id?: string };
      return p.entity === 'mesh_task' && p.action === 'completed' && p.id === taskId;
    });

  /** A heartbeat's change: the same lease, a later expiry. */
  const extend = `update mesh_tasks set lease_expires_at = '2026-11-24T10:30:00.000Z' where id = $1`;
  /** The lease gone: reclaimed by another agent's claim. */
  const reclaim = `update mesh_tasks set lease_id = 'lease_other', claimed_by = 'ag_other' where id = $1`;

  const stateOf = async (c: Claim) =>
    ((await t.call('GET', `/work/tasks/${c.task.id}`)).body as { state: string }).state;
  const completeOne = (c: Claim) => () =>
    mcp('complete_mesh_task', { task_id: c.task.id, lease_id: c.lease_id, result: { n: 1 } });
  const completeAll = (cs: Claim[]) => () =>
    mcp('complete_mesh_tasks', { items: cs.map((c) => ({ task_id: c.task.id, lease_id: c.lease_id })) });

  it('completes a task whose lease was extended meanwhile, once (one request)', async () => {
    const [c] = (await claimed(1)) as [Claim];
    const r = await racing(c.task.id, extend, completeOne(c));
    expect(r.status).toBe(200);
    expect((r.body.result as { state: string }).state).toBe('completed');
    expect(await completedEvents(c.task.id)).toHaveLength(1);
  });

  it('completes a task whose lease was extended meanwhile, once (a batch)', async () => {
    const [a, b] = (await claimed(2)) as [Claim, Claim];
    const r = await racing(a.task.id, extend, completeAll([a, b]));
    expect(r.status).toBe(200);
    expect((r.body.result as { items: { ok: boolean }[] }).items.map((i) => i.ok)).toEqual([true, true]);
    for (const c of [a, b]) {
      expect(await stateOf(c)).toBe('completed');
      expect(await completedEvents(c.task.id)).toHaveLength(1);
    }
  });

  it('refuses a completion whose lease was taken meanwhile, changing nothing (one request)', async () => {
    const [c] = (await claimed(1)) as [Claim];
    const r = await racing(c.task.id, reclaim, completeOne(c));
    expect(r.status).toBe(409);
    expect(r.body.code).toBe('stale_lease');
    expect(await stateOf(c)).toBe('claimed');
    expect(await completedEvents(c.task.id)).toHaveLength(0);
  });

  it('refuses a completion whose lease was taken meanwhile, changing nothing (a batch)', async () => {
    const [a, b] = (await claimed(2)) as [Claim, Claim];
    const r = await racing(a.task.id, reclaim, completeAll([a, b]));
    expect(r.status).toBe(200);
    const items = (r.body.result as { items: { ok: boolean; code?: string }[] }).items;
    expect(items.map((i) => [i.ok, i.code])).toEqual([
      [false, 'stale_lease'],
      [true, undefined],
    ]);
    expect(await stateOf(a)).toBe('claimed');
    expect(await completedEvents(a.task.id)).toHaveLength(0);
    expect(await completedEvents(b.task.id)).toHaveLength(1);
  });
});
