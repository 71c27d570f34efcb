// A lease belongs to the node of the agent that claimed it (issue 27, case 5): another node
// that learns the lease id can neither start, heartbeat, report progress on, complete nor fail
// the task, on either store (PostgreSQL: inside the one-statement transitions of postgres/leased.ts).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loggedEvents } from '../../../test/support/events.js';
import { meshFixture, STORES, startTestTower, type TestTower } from '../../../test/support/tower.js';

for (const kind of STORES) {
  describe(`mesh leases on ${kind}`, () => {
    let t: TestTower;
    let owner: { jwt: string };
    let other: { jwt: string };
    let agentId: string;
    let missionId: string;

    beforeAll(async () => {
      t = await startTestTower(kind);
      ({ node: owner, agentId, missionId } = await meshFixture(t, 'owner'));
      other = (await t.call('POST', '/nodes', { hostname: 'intruder' })).body as { jwt: string };
    });
    afterAll(async () => {
      await t?.close();
    });

    const mcp = (jwt: string, tool: string, args: Record<string, unknown>) =>
      t.call('POST', '/mcp/call', { tool, args }, jwt);

    it("refuses every report on a task from a node other than its claimer's, and changes nothing", async () => {
      const created = await t.call('POST', `/work/missions/${missionId}/tasks`, { title: 'mine' });
      expect(created.status).toBe(201);
      const claim = (await mcp(owner.jwt, 'claim_mesh_task', { agent_id: agentId, mission_id: missionId }))
        .body.result as { task: { id: string }; lease_id: string };
      const lease = { task_id: claim.task.id, lease_id: claim.lease_id };
      const eventsBefore = (await loggedEvents(t.tower.store.db)).length;
      const before = (await t.call('GET', `/work/tasks/${claim.task.id}`)).body;

      const refused = [
        await mcp(other.jwt, 'start_mesh_task', lease),
        await mcp(other.jwt, 'heartbeat_mesh_task', lease),
        await mcp(other.jwt, 'report_progress', { ...lease, message: 'not yours' }),
        await mcp(other.jwt, 'complete_mesh_task', { ...lease, result: { stolen: true } }),
        await mcp(other.jwt, 'fail_mesh_task', { ...lease, reason: 'not yours' }),
        await mcp(other.jwt, 'complete_mesh_tasks', { items: [{ ...lease, result: { stolen: true } }] }),
      ];
      expect(refused.slice(0, 5).map((r) => [r.status, r.body.code])).toEqual(
        Array(5).fill([403, 'forbidden']),
      );
      expect(refused[5]?.body.result).toMatchObject({ items: [{ ok: false, code: 'forbidden' }] });
      expect((await t.call('GET', `/work/tasks/${claim.task.id}`)).body).toEqual(before);
      expect(await loggedEvents(t.tower.store.db)).toHaveLength(eventsBefore);

      // The claimer's own node still can, with the same lease.
      const done = await mcp(owner.jwt, 'complete_mesh_task', { ...lease, result: { ok: true } });
      expect(done.status).toBe(200);
      expect(done.body.result).toMatchObject({ state: 'completed', result: { ok: true } });
    });
  });
}
