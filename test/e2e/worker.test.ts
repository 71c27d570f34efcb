// The task worker with real processes: tasks submitted over REST are claimed by `svc run`'s
// loop in svcd, run in reference-agent subagents, and completed (or failed with the reason).
import { execFile } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openStream } from '../support/feed-stream.js';
import { type NodeStack, startNodeStack } from '../support/node-stack.js';
import { waitFor } from '../support/poll.js';
import { type Proc, SVC_BIN, spawnProc } from '../support/procs.js';

interface Task {
  id: string;
  state: string;
  attempt: number;
  claimed_by: string | null;
  assigned_agent_id: string | null;
  parent_id: string | null;
  created_at: string;
  result: { summary?: string } | null;
  failure_reason: string | null;
}

interface Loop {
  runtime: string;
  agent_id: string;
  running: { task_id: string }[];
  completed: number;
  failed: number;
  counts: { cancelled: number };
  recent_claims: { task_id: string; wake: string; woken_at: string; claimed_at: string }[];
}

const execFileP = promisify(execFile);
const ENDED = ['completed', 'failed', 'cancelled'];

describe('svc run: the claim loop and ephemeral subagents', () => {
  let stack: NodeStack;
  let domainId: string;
  let missionId: string;

  const svc = (args: string[]) => stack.svc(args);
  const api = async <T>(method: string, path: string, body?: unknown): Promise<T> =>
    (await (await stack.admin(method, path, body)).json()) as T;

  const submit = (body: Record<string, unknown>) =>
    api<Task>('POST', `/work/missions/${missionId}/tasks`, body);
  const getTask = (id: string) => api<Task>('GET', `/work/tasks/${id}`);
  const loops = async () =>
    (JSON.parse(await svc(['--json', 'worker', 'status'])) as { loops: Loop[] }).loops;
  const loopOf = async (runtime: string) => (await loops()).find((l) => l.runtime === runtime);
  const startLoop = async (runtime: string, ...args: string[]) =>
    JSON.parse(await svc(['--json', 'run', runtime, '--domain', domainId, ...args])) as Loop;
  const waitEnded = (ids: string[], timeoutMs = 60_000) =>
    waitFor(
      `${ids.length} task(s) to end`,
      async () => {
        const ts = await Promise.all(ids.map(getTask));
        return ts.every((t) => ENDED.includes(t.state)) ? ts : null;
      },
      { timeoutMs },
    );
  /** The process is gone (or a zombie nobody waits for). */
  const processGone = (pid: number) => {
    try {
      return /\) [ZX] /.test(readFileSync(`/proc/${pid}/stat`, 'utf8'));
    } catch {
      return true;
    }
  };

  beforeAll(async () => {
    stack = await startNodeStack({
      name: 'worker',
      beforeSvcd: async (s) => {
        ({ domainId, missionId } = await s.mission('work', 'm'));
      },
    });
  });
  afterAll(async () => {
    await stack?.stop();
  });

  it('completes submitted tasks with progress, fails a failing one with its reason', async () => {
    const started = JSON.parse(
      await svc(['--json', 'run', 'alpha_agent_acp', '--domain', domainId, '--max-concurrent', '3']),
    ) as { agent_id: string };
    expect(started.agent_id).toMatch(/^ag_/);
    const ids: string[] = [];
    for (let i = 0; i < 6; i++) {
      const t = await api<Task>('POST', `/work/missions/${missionId}/tasks`, {
        title: `progress: 1\nrun: echo task-${i}`,
      });
      ids.push(t.id);
    }
    const bad = JSON.parse(
      await svc(['--json', 'task', 'submit', 'fail: no way', '--mission', missionId, '--max-attempts', '1']),
    ) as Task;
    await waitFor(
      'every task to end',
      async () => {
        const states = await Promise.all([...ids, bad.id].map((id) => api<Task>('GET', `/work/tasks/${id}`)));
        return states.every((s) => s.state === 'completed' || s.state === 'failed') ? states : null;
      },
      { timeoutMs: 90_000 },
    );
    for (const id of ids) {
      const t = await api<Task>('GET', `/work/tasks/${id}`);
      expect(t.state).toBe('completed');
      expect(t.result?.summary).toMatch(/task-\d/);
    }
    const failed = await api<Task>('GET', `/work/tasks/${bad.id}`);
    expect(failed.state).toBe('failed');
    expect(failed.failure_reason).toMatch(/no way/);
    const status = JSON.parse(await svc(['--json', 'worker', 'status'])) as {
      loops: { completed: number; failed: number }[];
    };
    expect(status.loops[0]).toMatchObject({ completed: 6, failed: 1 });
    const progress = await svc(['--json', 'feed', '--since', '0', '--type', 'progress', '--limit', '1']);
    expect(progress).toContain('"task_id"');
    const listed = JSON.parse(
      await svc(['--json', 'task', 'list', '--mission', missionId, '--state', 'completed']),
    ) as {
      items: Task[];
    };
    expect(listed.items.map((t) => t.id).sort()).toEqual([...ids].sort());
    expect(await svc(['agent', 'list', '--domain', domainId])).toContain(started.agent_id);
    expect(await svc(['agent', 'node', 'list'])).toMatch(/worker-node\s+yes/);
    expect(await svc(['worker', 'stop'])).toMatch(/stopped 1/);
  });

  it('completes 20 tasks submitted with curl, woken by task_ready, with progress on the feed', async () => {
    const loop = await startLoop('alpha_code', '--max-concurrent', '3', '--poll', '3600');
    await waitFor('the loop to be idle', async () => (await loopOf('alpha_code'))?.running.length === 0);
    const feed = openStream(
      `${stack.tower.url}/events/stream?type=progress&mission_id=${missionId}`,
      stack.adminToken,
    );
    const ids: string[] = [];
    for (let i = 0; i < 20; i++) {
      const { stdout } = await execFileP('curl', [
        '-sS',
        '-X',
        'POST',
        '-H',
        `Authorization: Bearer ${stack.adminToken}`,
        '-H',
        'Content-Type: application/json',
        '-d',
        JSON.stringify({ title: `bulk ${i}`, description: `run: echo bulk-${i}` }),
        `${stack.tower.url}/work/missions/${missionId}/tasks`,
      ]);
      ids.push((JSON.parse(stdout) as Task).id);
    }
    const done = await waitEnded(ids);
    for (const [i, t] of done.entries()) {
      expect(t).toMatchObject({ state: 'completed', claimed_by: loop.agent_id });
      expect(t.result?.summary).toContain(`bulk-${i}`);
    }
    // Polling is hourly: every claim came from a task_ready or from a slot freeing up, and the
    // first task's task_ready woke the idle loop within a second of its creation.
    const claims = (await loopOf('alpha_code'))?.recent_claims.filter((c) => ids.includes(c.task_id)) ?? [];
    expect(claims.map((c) => c.task_id).sort()).toEqual([...ids].sort());
    expect(claims.every((c) => c.wake === 'task_ready' || c.wake === 'slot_free')).toBe(true);
    const first = claims.find((c) => c.task_id === ids[0]);
    expect(first?.wake).toBe('task_ready');
    const wakeDelay = Date.parse(first?.woken_at ?? '') - Date.parse(done[0]?.created_at ?? '');
    expect(wakeDelay).toBeGreaterThanOrEqual(0);
    expect(wakeDelay).toBeLessThan(1000);
    await waitFor('progress of every task on the feed', () => {
      const seen = new Set(
        feed.got.map((e) => (e.data.payload as { task_id?: string } | undefined)?.task_id),
      );
      return ids.every((id) => seen.has(id));
    });
    await feed.close();
    await svc(['worker', 'stop', '--runtime', 'alpha_code']);
  });

  it('completes tasks by polling alone when task_ready is ignored', async () => {
    await startLoop('beta_cli', '--poll', '1', '--no-task-ready');
    const ids: string[] = [];
    for (let i = 0; i < 3; i++) ids.push((await submit({ title: `polled ${i}` })).id);
    const done = await waitEnded(ids);
    expect(done.map((t) => t.state)).toEqual(['completed', 'completed', 'completed']);
    const claims = (await loopOf('beta_cli'))?.recent_claims.filter((c) => ids.includes(c.task_id)) ?? [];
    expect(claims).toHaveLength(3);
    expect(claims.some((c) => c.wake === 'poll')).toBe(true);
    expect(claims.every((c) => c.wake === 'poll' || c.wake === 'slot_free')).toBe(true);
    await svc(['worker', 'stop', '--runtime', 'beta_cli']);
  });

  it('honours required capabilities, assigned agents and broadcast', async () => {
    const gpu = await startLoop('gamma_cli', '--capability', 'gpu', '--poll', '3600');
    const plain = await startLoop('alpha_code', '--poll', '3600');
    const needsGpu = await submit({ title: 'needs gpu', required_capabilities: ['gpu'] });
    const forPlain = await submit({
      title: 'for plain',
      claim_policy: 'assigned',
      assigned_agent_id: plain.agent_id,
    });
    const forGpu = await submit({
      title: 'for gpu',
      claim_policy: 'assigned',
      assigned_agent_id: gpu.agent_id,
    });
    const all = await submit({ title: 'everyone', claim_policy: 'broadcast' });
    const done = await waitEnded([needsGpu.id, forPlain.id, forGpu.id]);
    expect(done.map((t) => [t.state, t.claimed_by])).toEqual([
      ['completed', gpu.agent_id],
      ['completed', plain.agent_id],
      ['completed', gpu.agent_id],
    ]);
    const runsOf = async () =>
      (await api<{ items: Task[] }>('GET', `/work/missions/${missionId}/tasks?limit=500`)).items.filter(
        (t) => t.parent_id === all.id,
      );
    const runs = await runsOf();
    // one run per agent enrolled in the domain (four runtimes by now)
    expect(runs.length).toBe(4);
    const mine = runs.filter(
      (r) => r.assigned_agent_id === gpu.agent_id || r.assigned_agent_id === plain.agent_id,
    );
    const ended = await waitEnded(mine.map((r) => r.id));
    expect(ended.map((t) => [t.state, t.claimed_by === t.assigned_agent_id])).toEqual([
      ['completed', true],
      ['completed', true],
    ]);
    await svc(['worker', 'stop', '--runtime', 'gamma_cli']);
  });

  it('fails a failing task with its reason; after retry it runs again and succeeds', async () => {
    const marker = join(stack.tmp.dir, 'retry-marker');
    const t = await submit({
      title: 'flaky',
      description: `run: test -f ${marker} || { touch ${marker}; echo first-attempt-broke; exit 3; }`,
    });
    const [failed] = await waitEnded([t.id]);
    expect(failed?.state).toBe('failed');
    expect(failed?.failure_reason).toMatch(/^exit code 1|^exit code 3|command failed with exit code 3/);
    expect(failed?.failure_reason).toContain('first-attempt-broke');
    const retried = await api<Task>('POST', `/work/tasks/${t.id}/retry`, {});
    expect(retried.state).toBe('pending');
    await waitFor('the retry to complete', async () => (await getTask(t.id)).state === 'completed');
    expect((await getTask(t.id)).attempt).toBe(2);
  });

  it('cancelling a running task kills its subagent', async () => {
    const pidFile = join(stack.tmp.dir, 'cancel.pid');
    const t = await submit({ title: 'long', description: `run: echo $$ > ${pidFile}; exec sleep 120` });
    const pid = await waitFor('the subagent to start', () =>
      existsSync(pidFile) ? Number(readFileSync(pidFile, 'utf8').trim()) || null : null,
    );
    expect(processGone(pid)).toBe(false);
    const cancelled = await api<Task>('POST', `/work/tasks/${t.id}/cancel`, {});
    expect(cancelled.state).toBe('cancelled');
    await waitFor('the subagent to be killed', () => processGone(pid));
    await waitFor('the loop to count it', async () => (await loopOf('alpha_code'))?.counts.cancelled === 1);
    expect((await getTask(t.id)).state).toBe('cancelled');
  });

  it('after kill -9 of svcd mid-task, the task is reclaimed after lease expiry and completed once', async () => {
    const marker = join(stack.tmp.dir, 'crash-marker');
    const pidFile = join(stack.tmp.dir, 'crash.pid');
    const count = join(stack.tmp.dir, 'crash.count');
    const t = await submit({
      title: 'survives a crash',
      lease_seconds: 5,
      description: `run: if [ -f ${marker} ]; then echo second-run; else touch ${marker}; echo $$ > ${pidFile}; sleep 120; fi; echo done >> ${count}`,
    });
    const pid = await waitFor('the first run to start', () =>
      existsSync(pidFile) ? Number(readFileSync(pidFile, 'utf8').trim()) || null : null,
    );
    const svcd = stack.svcd as Proc;
    svcd.kill('SIGKILL');
    await svcd.exited;
    expect(processGone(pid)).toBe(false); // the subagent outlived its svcd
    await stack.startSvcd();
    // The restarted svcd kills the orphan and resumes its loop, which reclaims the task.
    await waitFor('the orphan to be killed', () => processGone(pid));
    await waitFor('the task to complete', async () => (await getTask(t.id)).state === 'completed', {
      timeoutMs: 90_000,
    });
    const done = await getTask(t.id);
    expect(done.attempt).toBe(2);
    expect(done.result?.summary).toContain('second-run');
    expect(readFileSync(count, 'utf8')).toBe('done\n');
  });

  it('svc run --foreground streams the loop until Ctrl-C, which stops it', async () => {
    const fg = spawnProc(
      SVC_BIN,
      ['run', 'beta_cli', '--domain', domainId, '--foreground', '--poll', '3600'],
      stack.cli,
    );
    await waitFor('the loop to run', async () => (await loopOf('beta_cli')) !== undefined);
    const t = await submit({
      title: 'watched',
      claim_policy: 'assigned',
      assigned_agent_id: (await loopOf('beta_cli'))!.agent_id,
    });
    await waitFor('the outcome on the terminal', () =>
      new RegExp(`completed\\s+${t.id}`).test(fg.stdout()) ? true : null,
    );
    expect(fg.stdout()).toMatch(new RegExp(`claimed\\s+${t.id} watched`));
    fg.kill('SIGINT');
    expect(await fg.exited).toBe(0);
    expect(fg.stderr()).toContain('work loop stopped');
    expect(await loopOf('beta_cli')).toBeUndefined();
  });

  it('never dispatches tasks created through the regular task API', async () => {
    const touched = join(stack.tmp.dir, 'regular-touched');
    const regular = await api<{ id: string; status: string }>(
      'POST',
      `/domains/${domainId}/m/${missionId}/t`,
      {
        title: `run: touch ${touched}`,
      },
    );
    expect(regular.status).toBe('todo');
    // A mesh task submitted after it is claimed and done: the loop looked for work since.
    const after = await submit({ title: 'after the regular one' });
    await waitEnded([after.id]);
    const claims = (await loopOf('alpha_code'))?.recent_claims.map((c) => c.task_id) ?? [];
    expect(claims).toContain(after.id);
    expect(claims).not.toContain(regular.id);
    expect(existsSync(touched)).toBe(false);
    expect(
      (await api<{ status: string }>('GET', `/domains/${domainId}/m/${missionId}/t/${regular.id}`)).status,
    ).toBe('todo');
    await svc(['worker', 'stop', '--now']);
  });
});
