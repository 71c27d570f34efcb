// PostgreSQL: the queue's one-statement transitions reach only the rows they change, whatever
// the statistics say. Finished tasks stay in mesh_tasks; once the table had been analyzed
// with a deep queue, the claim's generic plan (the hot pool plans generically, store/open.ts)
// joined its picked rows to the table by id with a hash join over a sequential scan, reading
// every task ever kept on every claim.

import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { meshFixture, startTestTower, type TestTower } from '../../../test/support/tower.js';
import { parsePostgresUrl } from '../store/open.js';
import { CLAIM } from './postgres/claim.js';
import { LEASED_CHANGES, leasedText } from './postgres/leased.js';

/** Every node of an EXPLAIN (FORMAT JSON) plan, depth first. */
function nodes(plan: Record<string, unknown>): Record<string, unknown>[] {
  const kids = (plan.Plans as Record<string, unknown>[] | undefined) ?? [];
  return [plan, ...kids.flatMap(nodes)];
}

describe('mesh claim plan on postgres', () => {
  let t: TestTower;
  let db: pg.Client;
  let agentId: string;
  let missionId: string;
  const HISTORY = 10_000;
  const PENDING = 10_000;
  const LEASED = 10_000;

  beforeAll(async () => {
    t = await startTestTower('postgres');
    const f = await meshFixture(t, 'plan');
    const { domainId } = f;
    missionId = f.missionId;
    agentId = f.agentId;
    db = new pg.Client(parsePostgresUrl(t.databaseUrl as string).config);
    await db.connect();
    // Finished tasks and a deep queue of pending ones, bulk-inserted as bench/queue does
    // (the API lists each under its mission too; claims do not read that list), then
    // statistics as autovacuum would gather them: with many pending tasks the planner
    // expects a claim to pick many rows.
    // Leased tasks too: the leased index then holds many entries, which a plan finding a
    // batch's rows through it would read. Their leases run far into the future, so the
    // tower's lease sweeper leaves them alone (sweeping them while a phase below updates
    // them all could deadlock with it).
    for (const [prefix, state, n] of [
      ['mt_done', 'completed', HISTORY],
      ['mt_wait', 'pending', PENDING],
      ['mt_held', 'claimed', LEASED],
    ] as const) {
      const leased = state === 'claimed';
      await db.query(
        `insert into mesh_tasks (id, mission_id, domain_id, parent_id, title, description, claim_policy,
           priority, assigned_agent_id, required_capabilities, state, attempt, max_attempts,
           lease_seconds, lease_id, lease_expires_at, claimed_by, result, failure_reason, created_at,
           updated_at)
         select $1 || lpad(g::text, 10, '0'), $2, $3, null, 'old', '', 'first_claim', 0, null,
           '[]', $4, 1, 3, 60, case when $6 then 'lease_' || g end,
           case when $6 then '2999-01-01T00:00:00.000Z' end, null, null, null,
           '2026-01-01T00:00:00.000Z', '2026-01-01T00:00:00.000Z'
         from generate_series(1, $5) g`,
        [prefix, missionId, domainId, state, n, leased],
      );
    }
    for (const title of ['first', 'second', 'third']) {
      const r = await t.call('POST', `/work/missions/${missionId}/tasks`, { title, priority: 1 });
      expect(r.status).toBe(201);
    }
    await db.query('set plan_cache_mode = force_generic_plan');
  });
  afterAll(async () => {
    await db?.end();
    await t?.close();
  });

  // A fresh store has no statistics until autovacuum analyzes it (bench/queue's drains run
  // before it does); a store analyzed before its tasks were claimed has statistics saying
  // no task is leased (a plan reading the leased index then looks free); a store in use has
  // statistics as they are. All three are checked, each with plans made afresh.
  const phases = ['not yet analyzed', 'analyzed before its tasks were claimed', 'analyzed'] as const;
  for (const phase of phases) {
    describe(phase, () => {
      beforeAll(async () => {
        await db.query('deallocate all');
        if (phase === 'analyzed before its tasks were claimed') {
          await db.query(`update mesh_tasks set state = 'completed' where id like 'mt_held%'`);
          await db.query('analyze mesh_tasks');
          await db.query(`update mesh_tasks set state = 'claimed' where id like 'mt_held%'`);
        }
        if (phase === 'analyzed') await db.query('analyze mesh_tasks');
      });

      it.each([
        ['any', CLAIM.any, false],
        ['mission', CLAIM.mission, true],
      ] as const)(
        'reads mesh_tasks through an index or by TID only (%s)',
        async (name, text, withMission) => {
          await db.query(`prepare plan_${name} as ${text}`);
          // $1 agent, $2 domains, $3 node, $4 limit, $5 leases, $6 now (ms), $7 now (ISO), $8 mission.
          const args = [
            `'${agentId}'`,
            'null',
            'null',
            '100',
            "array['lease_x']",
            '0',
            "'2026-01-01T00:00:00.000Z'",
          ];
          if (withMission) args.push(`'${missionId}'`);
          const res = await db.query(`explain (format json) execute plan_${name}(${args.join(', ')})`);
          const plan = (res.rows[0]['QUERY PLAN'] as { Plan: Record<string, unknown> }[])[0]?.Plan ?? {};
          const onTasks = nodes(plan).filter((n) => n['Relation Name'] === 'mesh_tasks');
          expect(onTasks.length).toBeGreaterThan(0);
          for (const n of onTasks)
            expect(['Index Scan', 'Tid Scan', 'ModifyTable']).toContain(n['Node Type']);
          for (const n of onTasks.filter((x) => x['Node Type'] === 'Index Scan')) {
            expect(['mesh_tasks_pending', 'mesh_tasks_pkey']).toContain(n['Index Name']);
          }
        },
      );

      it.each(
        LEASED_CHANGES.flatMap((change) => [
          [change.name, leasedText(change), false],
          [`${change.name}_1`, leasedText(change, true), true],
        ]) as [string, string, boolean][],
      )('finds the rows of a lease-holding change by key and TID only (%s)', async (name, text, single) => {
        await db.query(`prepare ${name} as ${text}`);
        // $1 task ids, $2 leases, $3 args, $4 visible domains, $5 now, $6 requesting nodes.
        const args = single
          ? "'mt_x', 'lease_x', null, null, '2026-01-01T00:00:00.000Z', 'node_x'"
          : "array['mt_x'], array['lease_x'], array[null::text], array[null::text], '2026-01-01T00:00:00.000Z', array['node_x']";
        const res = await db.query(`explain (format json) execute ${name}(${args})`);
        const plan = (res.rows[0]['QUERY PLAN'] as { Plan: Record<string, unknown> }[])[0]?.Plan ?? {};
        const onTasks = nodes(plan).filter((x) => x['Relation Name'] === 'mesh_tasks');
        expect(onTasks.length).toBeGreaterThan(0);
        for (const n of onTasks) expect(['Index Scan', 'Tid Scan', 'ModifyTable']).toContain(n['Node Type']);
        // By key: the leased index holds every claimed and running task (and, until vacuum,
        // entries of finished ones); reading it to find a batch's rows read them all.
        for (const n of onTasks.filter((x) => x['Node Type'] === 'Index Scan')) {
          expect(n['Index Name']).toBe('mesh_tasks_pkey');
        }
      });
    });
  }

  it('claims the best pending tasks among many, with finished ones kept', async () => {
    const r = await t.call('POST', '/mcp/call', {
      tool: 'claim_mesh_tasks',
      args: { agent_id: agentId, mission_id: missionId, max: 3 },
    });
    expect(r.status).toBe(200);
    const claims = (
      r.body.result as { items: { task: { title: string; state: string; claimed_by: string } }[] }
    ).items;
    expect(claims.map((c) => c.task.title)).toEqual(['first', 'second', 'third']);
    for (const c of claims) expect(c.task).toMatchObject({ state: 'claimed', claimed_by: agentId });
  });
});
