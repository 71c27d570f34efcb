// The worker component in-process: mgmt methods over the real mgmt.sock, task_ready and
// task_cancelled from a fake control channel, an in-memory mesh, real reference subagents.
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import type { FakeControl } from '../../../test/support/control.js';
import { makeTestDaemonContext, type TestDaemonContext } from '../../../test/support/daemon-ctx.js';
import { FakeMesh } from '../../../test/support/fake-mesh.js';
import { waitFor } from '../../../test/support/poll.js';
import { groupAlive, spawnGroup, UNIT_MARKER_ENV } from '../process/group.js';
import { createRuntimeRunner } from '../runtimes/runner.js';
import { defaultSvcdConfig } from '../svcd-config.js';
import { workerMethods } from './methods.js';
import { createWorkerStore } from './store.js';
import { createWorker, type Worker } from './worker.js';

interface LoopStatus {
  agent_id: string;
  running: { task_id: string }[];
  counts: { completed: number; failed: number; cancelled: number };
  recent_claims: { task_id: string; wake: string }[];
}

describe('worker component', () => {
  let t: TestDaemonContext | null = null;
  const workers: Worker[] = [];
  afterEach(async () => {
    for (const w of workers.splice(0)) await w.stop();
    await t?.close();
    t = null;
  });

  async function setup(mesh: FakeMesh) {
    t = await makeTestDaemonContext();
    const enrolled: unknown[] = [];
    t.ctx.tower = {
      baseUrl: 'http://tower.test',
      request: async <T>(method: string, path: string, body?: unknown) => {
        if (method === 'GET' && path.startsWith('/agents')) return { items: [] } as T;
        if (method === 'POST' && path === '/agents') {
          enrolled.push(body);
          return { id: 'agt_1', ...(body as object) } as T;
        }
        throw new Error(`unexpected ${method} ${path}`);
      },
    };
    const config = defaultSvcdConfig();
    config.supervisor.stopGraceMs = 2000;
    const ctx = t.ctx;
    const runner = createRuntimeRunner({
      runtimes: config.runtime,
      sessions: ctx.secrets,
      logsDir: ctx.paths.logsDir,
      baseEnv: ctx.env,
      clock: ctx.clock,
      stopGraceMs: 2000,
    });
    const make = () => {
      const w = createWorker(ctx, () => runner, {
        api: mesh,
        config: config.worker,
        policy: config.agent_policy,
        stopGraceMs: 2000,
      });
      // mgmt.sock answers with the test's first worker.
      if (workers.length === 0) t!.register(workerMethods(w));
      workers.push(w);
      return w;
    };
    return { ctx, enrolled, make, control: ctx.control as FakeControl };
  }

  it('enrols an agent, claims at start, wakes on task_ready and reports status', async () => {
    const mesh = new FakeMesh();
    mesh.add('mt_1', 'first');
    const { make, control, enrolled } = await setup(mesh);
    await make().start();
    const started = await t!.call<LoopStatus>('worker.start', {
      runtime: 'alpha_code',
      domain_id: 'dom_1',
      max_concurrent: 2,
      poll_seconds: 3600,
    });
    expect(started.agent_id).toBe('agt_1');
    expect(enrolled).toEqual([{ domain_id: 'dom_1', runtime: 'alpha_code', name: 'worker-alpha_code' }]);
    await waitFor('mt_1 completed', () => mesh.get('mt_1').state === 'completed');
    mesh.add('mt_2', 'second');
    control.deliver({ type: 'task_ready', task_id: 'mt_2', mission_id: 'mis_1', domain_id: 'dom_1' });
    await waitFor('mt_2 completed', () => mesh.get('mt_2').state === 'completed');
    const s = await waitFor('both counted', async () => {
      const st = await t!.call<{ loops: LoopStatus[] }>('worker.status');
      return st.loops[0]?.counts.completed === 2 ? st : null;
    });
    expect(s.loops[0]?.recent_claims.map((c) => [c.task_id, c.wake])).toEqual([
      ['mt_1', 'start'],
      ['mt_2', 'task_ready'],
    ]);
  });

  it('stops the subagent of a task cancelled on the tower', async () => {
    const mesh = new FakeMesh();
    mesh.add('mt_c', 'sleep: 60');
    const { make, control } = await setup(mesh);
    await make().start();
    await t!.call('worker.start', { runtime: 'alpha_code', domain_id: 'dom_1', poll_seconds: 3600 });
    await waitFor('running', () => mesh.get('mt_c').state === 'running');
    const runs = await waitFor('run recorded', async () => {
      const r = await createWorkerStore(t!.ctx.state).runs();
      return r.length === 1 ? r : null;
    });
    mesh.cancel('mt_c');
    control.deliver({ type: 'task_cancelled', task_id: 'mt_c' });
    await waitFor('cancelled', async () => {
      const s = await t!.call<{ loops: LoopStatus[] }>('worker.status');
      return s.loops[0]?.counts.cancelled === 1;
    });
    expect(groupAlive(runs[0]!.pgid)).toBe(false);
    expect(await createWorkerStore(t!.ctx.state).runs()).toEqual([]);
    // Presence told to the tower: idle at start, busy while the subagent ran, idle after,
    // and gone (offline) once the loop is stopped.
    await waitFor('idle again', () => control.presence.at(-1)?.status === 'idle');
    await t!.call('worker.stop', { now: true });
    // (The channel sends a status only when it changes: repeats are collapsed here too.)
    const changes = control.presence
      .map((p) => [p.agent_id, p.status])
      .filter((p, i, all) => i === 0 || p[1] !== all[i - 1]?.[1]);
    expect(changes).toEqual([
      ['agt_1', 'idle'],
      ['agt_1', 'busy'],
      ['agt_1', 'idle'],
      ['agt_1', null],
    ]);
  });

  it('reports its agent errored while claims fail, and idle once they work again', async () => {
    const mesh = new FakeMesh();
    mesh.claimError = new Error('tower unreachable');
    const { make, control } = await setup(mesh);
    await make().start();
    await t!.call('worker.start', { runtime: 'alpha_code', domain_id: 'dom_1', poll_seconds: 3600 });
    await waitFor('errored', () => control.presence.at(-1)?.status === 'errored');
    mesh.claimError = null;
    control.deliver({ type: 'task_ready', task_id: 'mt_x', mission_id: 'mis_1', domain_id: 'dom_1' });
    await waitFor('idle', () => control.presence.at(-1)?.status === 'idle');
  });

  it('stops an ACP subagent of a task cancelled on the tower mid-prompt', async () => {
    const mesh = new FakeMesh();
    mesh.add('mt_a', 'sleep: 60');
    const { make, control } = await setup(mesh);
    await make().start();
    await t!.call('worker.start', { runtime: 'alpha_agent_acp', domain_id: 'dom_1', poll_seconds: 3600 });
    await waitFor('running', () => mesh.get('mt_a').state === 'running');
    const runs = await waitFor('run recorded', async () => {
      const r = await createWorkerStore(t!.ctx.state).runs();
      return r.length === 1 ? r : null;
    });
    mesh.cancel('mt_a');
    control.deliver({ type: 'task_cancelled', task_id: 'mt_a' });
    await waitFor('cancelled', async () => {
      const s = await t!.call<{ loops: LoopStatus[] }>('worker.status');
      return s.loops[0]?.counts.cancelled === 1;
    });
    expect(groupAlive(runs[0]!.pgid)).toBe(false);
  });

  it('after a crash, kills the orphaned subagent and resumes the work loop', async () => {
    const mesh = new FakeMesh();
    const { ctx, make } = await setup(mesh);
    const store = createWorkerStore(ctx.state);
    await store.migrate();
    // What a crashed svcd leaves: a subagent still running, its run and loop in state.db.
    const orphan = spawnGroup(['sleep', '60'], {
      cwd: ctx.paths.workDir,
      env: { PATH: process.env.PATH, [UNIT_MARKER_ENV]: 'run_orphan' },
      stdin: 'ignore',
    });
    const pgid = orphan.pid!;
    await store.saveRun({ task_id: 'mt_o', run_id: 'run_orphan', pgid, agent_id: 'agt_1', started_at: 'x' });
    await store.saveLoop({
      loop_key: 'alpha_code@dom_1',
      runtime: 'alpha_code',
      domain_id: 'dom_1',
      agent_id: 'agt_1',
      max_concurrent: 1,
      poll_ms: 3_600_000,
      timeout_ms: null,
      started_at: '2026-01-01T00:00:00.000Z',
      task_ready: 1,
    });
    mesh.add('mt_o', 'again');
    await make().start();
    expect(groupAlive(pgid)).toBe(false);
    expect(await store.runs()).toEqual([]);
    await waitFor('resumed loop completes the task', () => mesh.get('mt_o').state === 'completed');
    expect(join(ctx.paths.workDir)).toBe(ctx.paths.workDir);
  });

  it('worker.stop stops claiming; an unknown loop is not_found', async () => {
    const mesh = new FakeMesh();
    const { make } = await setup(mesh);
    await make().start();
    await t!.call('worker.start', { runtime: 'beta_cli', domain_id: 'dom_1', poll_seconds: 3600 });
    const r = await t!.call<{ stopped: LoopStatus[] }>('worker.stop', { runtime: 'beta_cli' });
    expect(r.stopped.map((l) => l.agent_id)).toEqual(['agt_1']);
    expect((await t!.call<{ loops: unknown[] }>('worker.status')).loops).toEqual([]);
    expect(await createWorkerStore(t!.ctx.state).loops()).toEqual([]);
    await expect(t!.call('worker.stop', { runtime: 'beta_cli' })).rejects.toMatchObject({
      code: 'not_found',
    });
  });
});
