// Every mesh task action from every state, on both stores (issue 5: "every legal transition
// and every illegal one"). A legal one changes the state and writes its `matrix` event; an
// illegal one is 409 (stale_lease or illegal_transition) and changes nothing, event included.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loggedEvents } from '../../../test/support/events.js';
import { STORES, startTestTower, type TestTower } from '../../../test/support/tower.js';
import { FakeClock } from '../../lib/clock.js';

type State = 'pending' | 'claimed' | 'running' | 'completed' | 'failed' | 'cancelled';
type Action = 'claim' | 'start' | 'heartbeat' | 'progress' | 'complete' | 'fail' | 'retry' | 'cancel';
/** A state after the action (200), a 409 code, or `none`: the claim finds nothing. */
type Outcome = State | 'stale_lease' | 'illegal_transition' | 'none';

const STALE = 'stale_lease';
const ILLEGAL = 'illegal_transition';

// The lease used is the task's current one, or for a task without one the lease it last had
// (pending: one it never had). docs/mesh.md, States.
const TABLE: Record<State, Record<Action, Outcome>> = {
  pending: {
    claim: 'claimed',
    start: STALE,
    heartbeat: STALE,
    progress: STALE,
    complete: STALE,
    fail: STALE,
    retry: ILLEGAL,
    cancel: 'cancelled',
  },
  claimed: {
    claim: 'none',
    start: 'running',
    heartbeat: 'claimed',
    progress: 'claimed',
    complete: 'completed',
    fail: 'failed',
    retry: ILLEGAL,
    cancel: 'cancelled',
  },
  running: {
    claim: 'none',
    // Starting again is answered with the task (a worker retrying a lost reply), no event.
    start: 'running',
    heartbeat: 'running',
    progress: 'running',
    complete: 'completed',
    fail: 'failed',
    retry: ILLEGAL,
    cancel: 'cancelled',
  },
  completed: {
    claim: 'none',
    start: STALE,
    heartbeat: STALE,
    progress: STALE,
    complete: STALE,
    fail: STALE,
    retry: ILLEGAL,
    cancel: ILLEGAL,
  },
  failed: {
    claim: 'none',
    start: STALE,
    heartbeat: STALE,
    progress: STALE,
    complete: STALE,
    fail: STALE,
    retry: 'pending',
    cancel: ILLEGAL,
  },
  cancelled: {
    claim: 'none',
    start: STALE,
    heartbeat: STALE,
    progress: STALE,
    complete: STALE,
    fail: STALE,
    retry: ILLEGAL,
    cancel: ILLEGAL,
  },
};

/** Actions that write a `matrix` event when legal (heartbeat, progress and a repeated start do not). */
const EVENT_ACTION: Partial<Record<Action, string>> = {
  claim: 'claimed',
  start: 'started',
  complete: 'completed',
  fail: 'failed',
  retry: 'retried',
  cancel: 'cancelled',
};

interface Task {
  id: string;
  state: State;
  attempt: number;
  updated_at: string;
  failure_reason: string | null;
  result: unknown;
}

const CASES = (Object.keys(TABLE) as State[]).flatMap((from) =>
  (Object.keys(TABLE[from]) as Action[]).map((action) => ({ from, action, outcome: TABLE[from][action] })),
);

describe.each(STORES)('mesh task transitions on %s', (store) => {
  let t: TestTower;
  const clock = new FakeClock(Date.parse('2026-11-23T10:00:00Z'));
  let node: { id: string; jwt: string };
  let domainId: string;
  let agentId: string;

  beforeAll(async () => {
    t = await startTestTower(store, { clock });
    node = (await t.call('POST', '/nodes', { hostname: `transitions-${store}` })).body as typeof node;
    domainId = ((await t.call('POST', '/domains', { name: 'transitions' })).body as { id: string }).id;
    agentId = (
      (await t.call('POST', '/agents', { domain_id: domainId, runtime: 'beta_cli' }, node.jwt)).body as {
        id: string;
      }
    ).id;
  });
  afterAll(async () => {
    await t?.close();
  });

  const mcp = (tool: string, args: Record<string, unknown>) =>
    t.call('POST', '/mcp/call', { tool, args }, node.jwt);
  const ok = <T>(r: { status: number; body: Record<string, unknown> }): T => {
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    return r.body.result as T;
  };

  /** A task of its own mission (claims see only it) brought to `state`; its last lease. */
  async function taskIn(state: State): Promise<{ task: Task; missionId: string; lease: string }> {
    const missionId = (
      (await t.call('POST', `/domains/${domainId}/m`, { name: `m-${state}` })).body as { id: string }
    ).id;
    const task = (await t.call('POST', `/work/missions/${missionId}/tasks`, { title: state }))
      .body as unknown as Task;
    if (state === 'pending') return { task, missionId, lease: 'lease_never_given' };
    const c = ok<{ lease_id: string }>(
      await mcp('claim_mesh_task', { agent_id: agentId, mission_id: missionId }),
    );
    const lease = c.lease_id;
    if (state === 'running' || state === 'completed' || state === 'failed') {
      ok(await mcp('start_mesh_task', { task_id: task.id, lease_id: lease }));
    }
    if (state === 'completed') ok(await mcp('complete_mesh_task', { task_id: task.id, lease_id: lease }));
    if (state === 'failed')
      ok(await mcp('fail_mesh_task', { task_id: task.id, lease_id: lease, reason: 'x' }));
    if (state === 'cancelled')
      expect((await t.call('POST', `/work/tasks/${task.id}/cancel`)).status).toBe(200);
    const now = (await t.call('GET', `/work/tasks/${task.id}`)).body as unknown as Task;
    expect(now.state).toBe(state);
    return { task: now, missionId, lease };
  }

  function act(action: Action, taskId: string, lease: string, missionId: string) {
    const held = { task_id: taskId, lease_id: lease };
    switch (action) {
      case 'claim':
        return mcp('claim_mesh_task', { agent_id: agentId, mission_id: missionId });
      case 'start':
        return mcp('start_mesh_task', held);
      case 'heartbeat':
        return mcp('heartbeat_mesh_task', held);
      case 'progress':
        return mcp('report_progress', { ...held, message: 'half way' });
      case 'complete':
        return mcp('complete_mesh_task', { ...held, result: { ok: true } });
      case 'fail':
        return mcp('fail_mesh_task', { ...held, reason: 'broke' });
      case 'retry':
        return t.call('POST', `/work/tasks/${taskId}/retry`);
      case 'cancel':
        return t.call('POST', `/work/tasks/${taskId}/cancel`);
    }
  }

  /** The task's `matrix` event actions, in insertion order. */
  async function actions(taskId: string): Promise<string[]> {
    return (await loggedEvents(t.tower.store.db))
      .filter((e) => e.type === 'matrix')
      .map((e) => JSON.parse(e.payload) as { id: string; action: string })
      .filter((p) => p.id === taskId)
      .map((p) => p.action);
  }

  it.each(CASES)('$action from $from: $outcome', async ({ from, action, outcome }) => {
    const { task, missionId, lease } = await taskIn(from);
    const before = await actions(task.id);
    await clock.advance(1000);
    const r = await act(action, task.id, lease, missionId);
    const after = (await t.call('GET', `/work/tasks/${task.id}`)).body as unknown as Task;
    const events = await actions(task.id);

    if (outcome === STALE || outcome === ILLEGAL) {
      expect(r.status).toBe(409);
      expect(r.body.code).toBe(outcome);
      // Nothing half-written: the row and its events are as they were.
      expect(after).toEqual(task);
      expect(events).toEqual(before);
      return;
    }
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    if (outcome === 'none') {
      expect(r.body.result).toBeNull();
      expect(after).toEqual(task);
      expect(events).toEqual(before);
      return;
    }
    expect(after.state).toBe(outcome);
    const writes = EVENT_ACTION[action] !== undefined && !(action === 'start' && from === 'running');
    expect(events).toEqual(writes ? [...before, EVENT_ACTION[action]] : before);
    if (action === 'retry') expect(after).toMatchObject({ attempt: 2, failure_reason: null });
    if (action === 'complete') expect(after.result).toEqual({ ok: true });
    if (action === 'fail') expect(after.failure_reason).toBe('broke');
  });
});
