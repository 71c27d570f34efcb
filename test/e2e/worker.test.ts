// The task worker with real processes: tasks submitted over REST are claimed by `svc run`'s
// loop in svcd, run in reference-agent subagents, and completed (or failed with the reason).
import { mkdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { waitFor } from '../support/poll.js';
import {
  isolatedEnv,
  run,
  SVC_BIN,
  SVCD_BIN,
  spawnProc,
  startTowerProc,
  stopAll,
  type TowerProc,
} from '../support/procs.js';
import { makeTempDir } from '../support/tmp.js';

interface Task {
  id: string;
  state: string;
  result: { summary?: string } | null;
  failure_reason: string | null;
}

describe('svc run: the claim loop and ephemeral subagents', () => {
  const tmp = makeTempDir('svc-e2e-worker-');
  const home = join(tmp.dir, 'home');
  const env = isolatedEnv(tmp.dir);
  let tower: TowerProc;
  let cli: NodeJS.ProcessEnv;
  let admin: string;
  let domainId: string;
  let missionId: string;

  const svc = async (args: string[]) => {
    const r = await run(SVC_BIN, args, cli);
    if (r.code !== 0) throw new Error(`svc ${args.join(' ')} failed (${r.code}): ${r.stderr}`);
    return r.stdout;
  };
  const api = async <T>(method: string, path: string, body?: unknown): Promise<T> => {
    const res = await fetch(tower.url + path, {
      method,
      headers: { authorization: `Bearer ${admin}`, 'content-type': 'application/json' },
      ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
    });
    return (await res.json()) as T;
  };

  beforeAll(async () => {
    for (const d of [home, env.HOME as string]) mkdirSync(d, { recursive: true, mode: 0o700 });
    tower = await startTowerProc(env);
    cli = { ...env, SVC_BASE_URL: tower.url };
    admin = readFileSync(join(home, 'tower', 'admin.token'), 'utf8').trim();
    domainId = (JSON.parse(await svc(['--json', 'domain', 'create', 'work'])) as { id: string }).id;
    missionId = (
      JSON.parse(await svc(['--json', 'mission', 'create', 'm', '--domain', domainId])) as { id: string }
    ).id;
    await svc(['agent', 'node', 'register', '--hostname', 'worker-node']);
    const svcd = spawnProc(SVCD_BIN, ['run', '--backend-url', tower.url], env);
    await waitFor(
      'svcd connected',
      async () => {
        if (svcd.child.exitCode !== null) throw new Error(`svcd exited: ${svcd.stderr()}`);
        const r = await run(SVC_BIN, ['--json', 'daemon', 'status'], cli);
        return r.code === 0 && (JSON.parse(r.stdout) as { tower: { connected: boolean } }).tower.connected;
      },
      { timeoutMs: 30_000 },
    );
  }, 60_000);
  afterAll(async () => {
    await stopAll();
    tmp.remove();
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
      { timeoutMs: 60_000 },
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
});
