// One-shot runs through the runtime API with the real reference agents (needs the build).
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { waitFor } from '../../../test/support/poll.js';
import { makeTempDir } from '../../../test/support/tmp.js';
import { systemClock } from '../../lib/clock.js';
import { SessionRegistry } from '../secrets/index.js';
import { defaultSvcdConfig } from '../svcd-config.js';
import type { ProgressUpdate } from './progress.js';
import { createRuntimeRunner, type RunResult, type RuntimeRunner, withSudoHint } from './runner.js';

describe('runtime runner', () => {
  let tmp: ReturnType<typeof makeTempDir>;
  let runner: RuntimeRunner;
  let sessions: SessionRegistry;

  beforeAll(() => {
    tmp = makeTempDir();
    sessions = new SessionRegistry(join(tmp.dir, 'secrets.sock'));
    const config = defaultSvcdConfig();
    config.runtime.gamma_cli = { command: ['sh', '-c', 'cat; echo " from stdin"'], env: { GAMMA: '1' } };
    runner = createRuntimeRunner({
      runtimes: config.runtime,
      sessions,
      logsDir: join(tmp.dir, 'logs'),
      baseEnv: { PATH: process.env.PATH, HOME: tmp.dir, SVC_TOKEN: 'svc_secret_operator_token' },
      clock: systemClock,
      stopGraceMs: 2000,
    });
  });
  afterAll(() => tmp.remove());

  it('runs a CLI agent once with the prompt as one argument and returns its answer', async () => {
    const r = await runner.run({
      runtime: 'alpha_code',
      prompt: 'hello "there"; ls',
      workdir: tmp.dir,
      agentId: 'a1',
    });
    expect(r).toMatchObject({
      runtime: 'alpha_code',
      ok: true,
      exit_code: 0,
      signal: null,
      stop_reason: null,
      failure: null,
      log_file: join(tmp.dir, 'logs', 'a1.log'),
    });
    expect(r.summary).toContain('echo: hello "there"; ls');
    expect(readFileSync(r.log_file, 'utf8')).toContain('echo: hello "there"; ls');
  });

  it('gives the agent a secrets session for the run only, and withholds svcd credentials', async () => {
    const probe =
      // biome-ignore lint/suspicious/noTemplateCurlyInString: shell expansions for the agent's sh
      'run: echo "sock=$SVC_SECRETS_SOCKET session=${#SVC_SECRETS_SESSION} agent=$SVC_AGENT_ID task=$SVC_TASK_ID token=${SVC_TOKEN:-none}"';
    const r = await runner.run({
      runtime: 'beta_cli',
      prompt: probe,
      workdir: tmp.dir,
      agentId: 'a2',
      taskId: 'mt_7',
    });
    expect(r.ok).toBe(true);
    expect(r.summary).toContain(
      `sock=${join(tmp.dir, 'secrets.sock')} session=43 agent=a2 task=mt_7 token=none`,
    );
    expect(sessions.size).toBe(0);
  });

  it('delivers the prompt on stdin when the template has no {prompt}', async () => {
    const r = await runner.run({
      runtime: 'gamma_cli',
      prompt: 'the prompt',
      workdir: tmp.dir,
      agentId: 'a3',
    });
    expect(r.summary).toBe('the prompt from stdin');
  });

  it('fails with the exit code when the agent fails', async () => {
    const r = await runner.run({
      runtime: 'alpha_code',
      prompt: 'fail: no tests',
      workdir: tmp.dir,
      agentId: 'a4',
    });
    expect(r).toMatchObject({ ok: false, exit_code: 1, failure: 'exit code 1' });
    expect(r.output_tail).toContain('failed: no tests');
  });

  it('kills the whole run at the timeout', async () => {
    const r = await runner.run({
      runtime: 'alpha_code',
      prompt: 'x',
      command: ['sh', '-c', 'sleep 30 & sleep 30; echo never'],
      workdir: tmp.dir,
      agentId: 'a5',
      timeoutMs: 300,
    });
    expect(r).toMatchObject({
      ok: false,
      exit_code: null,
      signal: 'SIGTERM',
      failure: 'timed out after 300ms',
    });
  });

  it('stops a cancelled run', async () => {
    const abort = new AbortController();
    const run = runner.run({
      runtime: 'alpha_code',
      prompt: 'sleep: 30',
      workdir: tmp.dir,
      agentId: 'a6',
      signal: abort.signal,
      onSpawn: () => abort.abort(),
    });
    expect(await run).toMatchObject({ ok: false, failure: 'cancelled' });
  });

  it('stops a cancelled ACP run mid-prompt, and its agent process with it', async () => {
    const abort = new AbortController();
    let pid = 0;
    const progressed = new Promise<void>((resolve) => {
      const run = runner.run({
        runtime: 'alpha_agent_acp',
        prompt: 'sleep: 120',
        workdir: tmp.dir,
        agentId: 'a7',
        signal: abort.signal,
        onSpawn: (p) => {
          pid = p;
        },
        onProgress: () => resolve(),
      });
      void run.then((r) => results.push(r));
    });
    const results: RunResult[] = [];
    await progressed;
    abort.abort();
    const r = await waitFor('the cancelled run to end', () => results[0]);
    expect(r).toMatchObject({ ok: false, failure: 'cancelled' });
    expect(() => process.kill(pid, 0)).toThrow();
  });

  it('says why a program cannot start', async () => {
    const r = await runner.run({
      runtime: 'alpha_code',
      prompt: 'x',
      command: ['/nonexistent/agent'],
      workdir: tmp.dir,
      agentId: 'a7',
    });
    expect(r).toMatchObject({
      ok: false,
      failure: expect.stringMatching(/^cannot start \/nonexistent\/agent: .*ENOENT/),
    });
  });

  it('runs an ACP agent for one prompt, streaming its progress, and succeeds on end_turn', async () => {
    const progress: ProgressUpdate[] = [];
    const r = await runner.run({
      runtime: 'alpha_agent_acp',
      prompt: 'progress: 2\nrun: echo from-acp',
      workdir: tmp.dir,
      agentId: 'acp1',
      onProgress: (u) => progress.push(u),
    });
    expect(r).toMatchObject({ ok: true, stop_reason: 'end_turn', failure: null, exit_code: null });
    expect(r.summary).toBe('made 2 progress steps\nfrom-acp');
    expect(progress).toEqual([
      { kind: 'thought', text: 'step 1 of 2\nstep 2 of 2\n' },
      { kind: 'message', text: 'made 2 progress steps\n' },
      {
        kind: 'tool_call',
        text: 'run: echo from-acp',
        data: { tool_call_id: 'tool-1', status: 'in_progress', tool_kind: 'execute' },
      },
      { kind: 'tool_call_update', text: 'from-acp\n', data: { tool_call_id: 'tool-1', status: 'completed' } },
      { kind: 'message', text: 'from-acp\n' },
    ]);
  });

  it('fails an ACP run with the reason the agent gives', async () => {
    const r = await runner.run({
      runtime: 'alpha_agent_acp',
      prompt: 'fail: cannot compile',
      workdir: tmp.dir,
      agentId: 'acp2',
    });
    expect(r).toMatchObject({ ok: false, stop_reason: null, failure: 'agent error: cannot compile' });
  });

  it('says so when a non-ACP program is configured as an ACP agent', async () => {
    const r = await runner.run({
      runtime: 'alpha_agent_acp',
      prompt: 'x',
      command: ['sh', '-c', 'echo not acp'],
      workdir: tmp.dir,
      agentId: 'acp3',
    });
    expect(r).toMatchObject({ ok: false, failure: 'ACP agent exited during initialize (exit code 0)' });
  });

  it('adds a hint when sudo failed for want of a TTY', () => {
    expect(withSudoHint('exit code 1', 'sudo: a terminal is required to read the password')).toBe(
      'exit code 1 (sudo failed: agent subprocesses have no TTY; configure passwordless sudo for the commands the agent needs)',
    );
    expect(withSudoHint('exit code 1', 'other')).toBe('exit code 1');
  });
});
