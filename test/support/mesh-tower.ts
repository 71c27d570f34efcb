// What the mesh area's route tests share: a test tower with a node, a domain and a mission,
// and the calls they make (enrol an agent, submit a task, call a tool, claim, drain).
import { afterAll, beforeAll, expect } from 'vitest';
import { FakeClock } from '../../src/lib/clock.js';
import { type StoreKind, startTestTower, type TestTower } from './tower.js';

export interface Task {
  id: string;
  title: string;
  state: string;
  attempt: number;
  claimed_by: string | null;
  failure_reason: string | null;
  parent_id: string | null;
}

export interface Claim {
  task: Task;
  lease_id: string;
  lease_seconds: number;
}

export interface MeshWorld {
  t: TestTower;
  node: { id: string; jwt: string };
  domainId: string;
  missionId: string;
}

/** A tower on `store` with the injected clock, a node `mesh-<store>`, domain `mesh`, mission `work`. */
export async function startMeshWorld(store: StoreKind, clock: FakeClock): Promise<MeshWorld> {
  const t = await startTestTower(store, { clock });
  const node = (await t.call('POST', '/nodes', { hostname: `mesh-${store}` })).body as MeshWorld['node'];
  const domainId = ((await t.call('POST', '/domains', { name: 'mesh' })).body as { id: string }).id;
  const missionId = (
    (await t.call('POST', `/domains/${domainId}/m`, { name: 'work' })).body as { id: string }
  ).id;
  return { t, node, domainId, missionId };
}

/** The calls of a test on `world()` (read at each call: the world starts in beforeAll). */
export function meshCalls(world: () => MeshWorld) {
  const enroll = async (caps: string[] = [], domain = world().domainId) => {
    const { t, node } = world();
    const r = await t.call(
      'POST',
      '/agents',
      { domain_id: domain, runtime: 'beta_cli', capabilities: caps },
      node.jwt,
    );
    expect(r.status).toBe(201);
    return r.body as { id: string };
  };
  const submit = async (body: Record<string, unknown>, mission = world().missionId) =>
    world().t.call('POST', `/work/missions/${mission}/tasks`, { title: 'job', ...body });
  const mcp = async (
    tool: string,
    args: Record<string, unknown>,
    token: string | undefined = world().node.jwt,
  ) => world().t.call('POST', '/mcp/call', { tool, args }, token);
  const claim = async (agentId: string) =>
    (await mcp('claim_mesh_task', { agent_id: agentId, mission_id: world().missionId })).body
      .result as Claim | null;
  /** Claims until nothing is left, so earlier tests' tasks do not leak into later ones. */
  const drain = async (agentId: string) => {
    for (let c = await claim(agentId); c; c = await claim(agentId)) {
      await mcp('complete_mesh_task', { task_id: c.task.id, lease_id: c.lease_id });
    }
  };
  return { enroll, submit, mcp, claim, drain };
}

/**
 * For a describe block: a mesh world on `store`, on a FakeClock of its own, started before the
 * block's tests and closed after them. Its fields read the started world; with the calls of
 * meshCalls on it.
 */
export function useMeshWorld(store: StoreKind) {
  const clock = new FakeClock(Date.parse('2026-11-23T10:00:00Z'));
  let world: MeshWorld | null = null;
  beforeAll(async () => {
    world = await startMeshWorld(store, clock);
  });
  afterAll(async () => {
    await world?.t.close();
  });
  const started = (): MeshWorld => {
    if (!world) throw new Error('the mesh world starts in beforeAll');
    return world;
  };
  return {
    clock,
    get t() {
      return started().t;
    },
    get node() {
      return started().node;
    },
    get domainId() {
      return started().domainId;
    },
    get missionId() {
      return started().missionId;
    },
    ...meshCalls(started),
  };
}
