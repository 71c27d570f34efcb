// The tower's operator metrics move when what they count happens, on both stores: live tasks
// by state, claims and their latency, finished tasks, lease expiries and reclaims (with the
// injected clock), agents by presence, pending approvals; a store that does not answer leaves
// its gauges out of the scrape and counts the failure.
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type MeshWorld, meshCalls, startMeshWorld, type Task } from '../../../test/support/mesh-tower.js';
import { PG_BASE_URL } from '../../../test/support/pg.js';
import { waitFor } from '../../../test/support/poll.js';
import { samples } from '../../../test/support/prom.js';
import { STORES } from '../../../test/support/tower.js';
import { FakeClock } from '../../lib/clock.js';
import { STORE_SCRAPE_TIMEOUT_MS } from './store-gauges.js';

describe.each(STORES)('tower metrics on %s', (store) => {
  const clock = new FakeClock(Date.parse('2026-11-27T10:00:00Z'));
  let world: MeshWorld;

  beforeAll(async () => {
    world = await startMeshWorld(store, clock);
  });
  afterAll(async () => {
    await world?.t.close();
  });
  const { enroll, submit, mcp, claim } = meshCalls(() => world);
  const scrape = async () => {
    const res = await world.t.tower.app.inject({
      method: 'GET',
      url: '/metrics',
      headers: { authorization: `Bearer ${world.t.adminToken}` },
    });
    expect(res.statusCode).toBe(200);
    return samples(res.body);
  };
  const tasks = (state: string) => `svc_mesh_tasks{mission_id="${world.missionId}",state="${state}"}`;

  it('counts live tasks by state, claims and their latency, and finished tasks', async () => {
    const agent = await enroll();
    const before = await scrape();
    expect(before.get(tasks('pending'))).toBeUndefined();
    expect(before.get('svc_agents{presence="idle"}')).toBe(1);
    const a = (await submit({})).body as unknown as Task;
    await submit({});
    expect((await scrape()).get(tasks('pending'))).toBe(2);

    const c = await claim(agent.id);
    expect(c?.task.id).toBe(a.id);
    let m = await scrape();
    expect([m.get(tasks('pending')), m.get(tasks('claimed'))]).toEqual([1, 1]);
    expect(m.get('svc_mesh_claims_total')).toBe(1);
    expect(m.get('svc_mesh_claim_duration_seconds_count{result="claimed"}')).toBe(1);

    expect((await mcp('start_mesh_task', { task_id: a.id, lease_id: c?.lease_id })).status).toBe(200);
    expect((await scrape()).get(tasks('running'))).toBe(1);
    expect((await mcp('complete_mesh_task', { task_id: a.id, lease_id: c?.lease_id })).status).toBe(200);
    m = await scrape();
    expect(m.get(tasks('running'))).toBeUndefined();
    expect(m.get('svc_mesh_tasks_finished_total{state="completed"}')).toBe(1);

    const b = await claim(agent.id);
    expect(
      (await mcp('fail_mesh_task', { task_id: b?.task.id, lease_id: b?.lease_id, reason: 'no' })).status,
    ).toBe(200);
    expect(await claim(agent.id)).toBeNull();
    m = await scrape();
    expect(m.get(tasks('pending'))).toBeUndefined();
    expect(m.get('svc_mesh_tasks_finished_total{state="failed"}')).toBe(1);
    expect(m.get('svc_mesh_claim_duration_seconds_count{result="empty"}')).toBe(1);
    expect(m.get('svc_mesh_reclaims_total')).toBe(0);
  });

  it('counts lease expiries and the reclaim that follows, by the injected clock', async () => {
    const agent = await enroll();
    const task = (await submit({ max_attempts: 2, lease_seconds: 10 })).body as unknown as Task;
    expect((await claim(agent.id))?.task.id).toBe(task.id);
    await clock.advance(10_000);
    await waitFor('the sweep', async () => {
      await clock.advance(1000);
      return (await scrape()).get('svc_mesh_lease_expiries_total{outcome="requeued"}') === 1;
    });
    expect((await claim(agent.id))?.task.id).toBe(task.id);
    expect((await scrape()).get('svc_mesh_reclaims_total')).toBe(1);
    await clock.advance(10_000);
    await waitFor('the last sweep', async () => {
      await clock.advance(1000);
      return (await scrape()).get('svc_mesh_lease_expiries_total{outcome="failed"}') === 1;
    });
    expect((await scrape()).get('svc_mesh_tasks_finished_total{state="failed"}')).toBe(2);
  });

  it('counts pending approvals', async () => {
    expect((await scrape()).get('svc_approvals_pending')).toBe(0);
    const r = await world.t.call('POST', '/approvals', { domain_id: world.domainId, title: 'deploy?' });
    expect(r.status).toBe(201);
    expect((await scrape()).get('svc_approvals_pending')).toBe(1);
    expect((await world.t.call('POST', `/approvals/${r.body.id}/approve`, {})).status).toBe(200);
    expect((await scrape()).get('svc_approvals_pending')).toBe(0);
  });

  it('labels HTTP requests by status code', async () => {
    expect((await world.t.call('GET', '/work/tasks/mt_nope')).status).toBe(404);
    const m = await scrape();
    expect(
      m.get('svc_http_request_duration_seconds_count{method="GET",route="/work/tasks/:task_id",code="404"}'),
    ).toBe(1);
  });

  it.runIf(store === 'postgres')(
    'serves the rest and counts the failure when the store does not answer in time',
    async () => {
      // A real lock: the approvals count waits behind it.
      const url = world.t.databaseUrl as string;
      const schema = new URL(url).searchParams.get('schema') as string;
      const locker = new pg.Client({ connectionString: PG_BASE_URL });
      await locker.connect();
      try {
        await locker.query('begin');
        await locker.query(`lock table "${schema}".approvals in access exclusive mode`);
        const res = world.t.tower.app.inject({
          method: 'GET',
          url: '/metrics',
          headers: { authorization: `Bearer ${world.t.adminToken}` },
        });
        let done = false;
        void res.then(() => {
          done = true;
        });
        await waitFor('the scrape to give up on the store', async () => {
          await clock.advance(STORE_SCRAPE_TIMEOUT_MS);
          return done;
        });
        const m = samples((await res).body);
        expect(m.get('svc_approvals_pending')).toBeUndefined();
        expect(m.get('svc_metrics_store_read_failures_total{reason="timeout"}')).toBe(1);
        expect(m.get('svc_mesh_claims_total')).toBeGreaterThan(0);
      } finally {
        await locker.query('rollback');
        await locker.end();
      }
      expect((await scrape()).get('svc_approvals_pending')).toBe(0);
    },
  );
});
