// One mesh task through a real ephemeral subagent (the reference agents; needs the build)
// against an in-memory mesh.
import { execFileSync } from 'node:child_process';
import { existsSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FakeMesh } from '../../../test/support/fake-mesh.js';
import { waitFor } from '../../../test/support/poll.js';
import { makeTempDir } from '../../../test/support/tmp.js';
import { systemClock } from '../../lib/clock.js';
import { silentLogger } from '../../lib/log.js';
import { SvcError } from '../../protocol/errors.js';
import type { RuntimeKind } from '../../protocol/runtimes.js';
import { groupAlive } from '../process/group.js';
import { createRuntimeRunner, type RuntimeRunner } from '../runtimes/runner.js';
import { SessionRegistry } from '../secrets/index.js';
import { defaultSvcdConfig } from '../svcd-config.js';
import { failureReason, runSubagent, type SubagentDeps, taskPrompt } from './subagent.js';

describe('subagent executor', () => {
  let tmp: ReturnType<typeof makeTempDir>;
  let runner: RuntimeRunner;
  let workRoot: string;
  const env = { PATH: process.env.PATH, HOME: process.env.HOME };

  beforeAll(() => {
    tmp = makeTempDir('svc-subagent-');
    workRoot = join(tmp.dir, 'work');
    runner = createRuntimeRunner({
      runtimes: defaultSvcdConfig().runtime,
      sessions: new SessionRegistry(join(tmp.dir, 'secrets.sock')),
      logsDir: join(tmp.dir, 'logs'),
      baseEnv: env,
      clock: systemClock,
      stopGraceMs: 2000,
    });
  });
  afterAll(() => tmp.remove());

  function deps(mesh: FakeMesh, over: Partial<SubagentDeps> = {}): SubagentDeps {
    return {
      runtimes: runner,
      api: mesh,
      clock: systemClock,
      log: silentLogger(),
      workRoot,
      env,
      timeoutMs: 60_000,
      cleanup: 'on_success',
      retryMs: 10,
      ...over,
    };
  }

  async function runOne(
    mesh: FakeMesh,
    runtime: RuntimeKind,
    over: Partial<SubagentDeps> = {},
    signal?: AbortSignal,
  ) {
    const lease = await mesh.claim('agt_1');
    if (!lease) throw new Error('nothing to claim');
    return runSubagent(deps(mesh, over), {
      lease,
      agentId: 'agt_1',
      runtime,
      signal: signal ?? new AbortController().signal,
    });
  }

  it('runs a CLI agent in the task working directory and completes the task with its answer', async () => {
    const mesh = new FakeMesh();
    const t = mesh.add('mt_cli', 'run: pwd; echo "task=$SVC_TASK_ID agent=$SVC_AGENT_ID"');
    const out = await runOne(mesh, 'alpha_code');
    expect(out.state).toBe('completed');
    expect(t.state).toBe('completed');
    expect(t.result?.summary).toContain(join(workRoot, 'mt_cli'));
    expect(t.result?.summary).toContain('task=mt_cli agent=agt_1');
    expect(t.result).toMatchObject({ runtime: 'alpha_code', exit_code: 0 });
    expect(t.progress[0]?.data).toMatchObject({ kind: 'started', runtime: 'alpha_code' });
    // cleanup = on_success: nothing left behind
    expect(existsSync(join(workRoot, 'mt_cli'))).toBe(false);
    expect(existsSync(join(workRoot, 'mt_cli.log'))).toBe(false);
  });

  it('forwards ACP session updates as progress and completes on end_turn', async () => {
    const mesh = new FakeMesh();
    const t = mesh.add('mt_acp', 'progress: 3');
    const out = await runOne(mesh, 'alpha_agent_acp');
    expect(out.state).toBe('completed');
    expect(t.state).toBe('completed');
    expect(t.result).toMatchObject({ runtime: 'alpha_agent_acp', stop_reason: 'end_turn' });
    // started + the agent's own updates
    expect(t.progress.length).toBeGreaterThanOrEqual(4);
    expect(t.progress.slice(1).every((p) => typeof p.data?.kind === 'string')).toBe(true);
  });

  it('fails the task with the reason and output tail, and keeps the directory for inspection', async () => {
    const mesh = new FakeMesh();
    const t = mesh.add('mt_fail', 'run: echo some-output-line\nfail: the disk is full');
    const out = await runOne(mesh, 'beta_cli');
    expect(out.state).toBe('failed');
    expect(t.state).toBe('failed');
    expect(t.failure_reason).toMatch(/^exit code 1\n/);
    expect(t.failure_reason).toContain('--- output tail ---');
    expect(t.failure_reason).toContain('the disk is full');
    expect(existsSync(join(workRoot, 'mt_fail'))).toBe(true);
  });

  it('kills a subagent past its timeout and fails the task with that reason', async () => {
    const mesh = new FakeMesh();
    const t = mesh.add('mt_slow', 'sleep: 30');
    let pgid = 0;
    const lease = await mesh.claim('agt_1');
    const out = await runSubagent(deps(mesh, { timeoutMs: 300, cleanup: 'always' }), {
      lease: lease!,
      agentId: 'agt_1',
      runtime: 'alpha_code',
      signal: new AbortController().signal,
      onSpawn: (_run, p) => {
        pgid = p;
      },
    });
    expect(out.state).toBe('failed');
    expect(t.failure_reason).toMatch(/^timed out after/);
    expect(pgid).toBeGreaterThan(0);
    expect(groupAlive(pgid)).toBe(false);
    expect(existsSync(join(workRoot, 'mt_slow'))).toBe(false);
  });

  it('stops the subagent when the task is cancelled and reports nothing more', async () => {
    const mesh = new FakeMesh();
    const t = mesh.add('mt_cancel', 'sleep: 30');
    const ac = new AbortController();
    let pgid = 0;
    const lease = await mesh.claim('agt_1');
    const running = runSubagent(deps(mesh), {
      lease: lease!,
      agentId: 'agt_1',
      runtime: 'alpha_agent_acp',
      signal: ac.signal,
      onSpawn: (_run, p) => {
        pgid = p;
      },
    });
    await waitFor('the subagent', () => pgid > 0 && t.state === 'running');
    mesh.cancel('mt_cancel');
    ac.abort('cancelled');
    const out = await running;
    expect(out.state).toBe('cancelled');
    expect(t.state).toBe('cancelled');
    expect(groupAlive(pgid)).toBe(false);
  });

  it('stops the subagent when a heartbeat finds the lease gone', async () => {
    const mesh = new FakeMesh();
    const t = mesh.add('mt_lost', 'sleep: 30', { lease_seconds: 3 });
    const out = runOne(mesh, 'alpha_code');
    await waitFor('running', () => t.state === 'running');
    mesh.expire('mt_lost');
    const o = await out;
    expect(o).toMatchObject({ state: 'abandoned', reason: 'lease_lost' });
    expect(t.state).toBe('pending');
  });

  it('runs in a git worktree of the mission repository and removes it afterwards', async () => {
    const repo = join(tmp.dir, 'repo');
    const git = (...args: string[]) => execFileSync('git', ['-C', repo, ...args], { encoding: 'utf8' });
    execFileSync('git', ['init', '-q', repo]);
    writeFileSync(join(repo, 'README'), 'hello from the repo\n');
    git('add', 'README');
    git('-c', 'user.name=t', '-c', 'user.email=t@example.com', 'commit', '-q', '-m', 'init');
    const mesh = new FakeMesh();
    mesh.repositories.set('mis_1', repo);
    const t = mesh.add('mt_git', 'run: cat README && git rev-parse --is-inside-work-tree');
    const out = await runOne(mesh, 'alpha_code');
    expect(out.state).toBe('completed');
    expect(t.result?.summary).toContain('hello from the repo');
    expect(t.result?.summary).toContain('true');
    expect(git('worktree', 'list')).not.toContain('mt_git');
    expect(existsSync(join(workRoot, 'mt_git'))).toBe(false);
  });

  it('leaves a task whose completion the tower never took to the lease sweep', async () => {
    const mesh = new FakeMesh();
    const t = mesh.add('mt_unrep', 'quick');
    mesh.complete = async () => {
      throw new SvcError('tower_unreachable', 'cannot reach the tower');
    };
    const out = await runOne(mesh, 'alpha_code');
    expect(out).toMatchObject({ state: 'abandoned', reason: 'unreported' });
    expect(t.state).toBe('running');
  });

  it('counts a completion or failure whose answer was lost after its commit as reported, not abandoned', async () => {
    const done = new FakeMesh();
    const t = done.add('mt_lost_ok', 'quick');
    done.loseAnswer = 'complete';
    expect(await runOne(done, 'alpha_code')).toMatchObject({ state: 'completed' });
    expect(t.state).toBe('completed');
    const failed = new FakeMesh();
    const f = failed.add('mt_lost_fail', 'fail: on purpose');
    failed.loseAnswer = 'fail';
    expect(await runOne(failed, 'alpha_code')).toMatchObject({ state: 'failed' });
    expect(f.state).toBe('failed');
    // A lease lost to another attempt is still lost: the task moved on without this run.
    const moved = new FakeMesh();
    const m = moved.add('mt_moved', 'quick');
    const complete = moved.complete.bind(moved);
    let calls = 0;
    moved.complete = async (...a) => {
      if (++calls > 1) return complete(...a);
      moved.expire('mt_moved');
      throw new SvcError('tower_unreachable', 'the replica went away before answering');
    };
    expect(await runOne(moved, 'alpha_code')).toMatchObject({ state: 'abandoned', reason: 'lease_lost' });
    expect(m.state).toBe('pending');
  });

  it('builds the prompt from title and description, and clips long output tails', () => {
    expect(taskPrompt({ title: 'T', description: '' })).toBe('T');
    expect(taskPrompt({ title: 'T', description: 'do it' })).toBe('T\n\ndo it');
    const r = failureReason('exited with code 1', 'x'.repeat(5000));
    expect(r.length).toBeLessThan(2100);
    expect(r.startsWith('exited with code 1\n--- output tail ---\n…')).toBe(true);
    expect(failureReason('cancelled', '  ')).toBe('cancelled');
  });
});
