// `svc agent signal` (and cron's dispatch = "signal"): deliver a prompt to an agent the way
// its runtime takes prompts. ACP: a new prompt on its live session; mux_hosted: typed into
// its tmux pane and Enter; PTY agents: typed into their terminal and Enter; CLI kinds: a
// new one-shot run of the agent's command. Without `wait` it returns once delivered.
import type { Clock } from '../../lib/clock.js';
import { newId } from '../../lib/ids.js';
import type { Logger } from '../../lib/log.js';
import type { SignalResult } from '../../protocol/agents.js';
import { SvcError } from '../../protocol/errors.js';
import { RUNTIMES } from '../runtimes/kinds.js';
import type { ProgressUpdate } from '../runtimes/progress.js';
import type { RuntimeRunner } from '../runtimes/runner.js';
import type { AgentSpec } from './agents-file.js';
import type { RunningUnit } from './backends/types.js';

export interface SignalTarget {
  agentId: string;
  spec: AgentSpec;
  /** The agent's unit when it is running, else null. */
  running: RunningUnit | null;
  cwd: string;
  logFile: string;
  clock: Clock;
  runtimes: RuntimeRunner;
  publishProgress(u: ProgressUpdate, runId: string): void;
  /** Keeps a background run known to the supervisor, which aborts it at stop. */
  track(p: Promise<unknown>, abort: AbortController): void;
  log: Logger;
}

export async function deliverSignal(
  t: SignalTarget,
  prompt: string,
  opts: { wait?: boolean },
): Promise<SignalResult> {
  const base = {
    agent_id: t.agentId,
    runtime: t.spec.runtime,
    exit_code: null,
    stop_reason: null,
    failure: null,
    summary: null,
  };
  const notRunning = (how: string) =>
    new SvcError(
      'agent_not_running',
      `agent "${t.agentId}" is not running, so nothing can ${how}; start it with "svc agent supervise restart ${t.agentId}"`,
    );
  const protocol = RUNTIMES[t.spec.runtime].protocol;

  if (protocol === 'acp') {
    const session = t.running?.acp;
    if (!session?.alive) throw notRunning('receive the prompt on its ACP session');
    const runId = newId('prm', t.clock.now());
    t.log.info({ agent: t.agentId, run_id: runId }, 'signal: ACP prompt');
    const turn = session.prompt(prompt, { onProgress: (u) => t.publishProgress(u, runId) });
    if (!opts.wait) {
      t.track(turn, new AbortController());
      return { ...base, delivery: 'acp_prompt', run_id: runId, done: false, ok: null };
    }
    const out = await turn;
    const failure =
      out.error !== null
        ? `agent error: ${out.error}`
        : out.stopReason === 'end_turn'
          ? null
          : `stop reason: ${out.stopReason}`;
    return {
      ...base,
      delivery: 'acp_prompt',
      run_id: runId,
      done: true,
      ok: failure === null,
      stop_reason: out.stopReason,
      failure,
      summary: out.text.trim().slice(-2048),
    };
  }

  if (t.spec.runtime === 'mux_hosted') {
    if (!t.running?.sendKeys) throw notRunning('type into its tmux pane');
    await t.running.sendKeys(prompt);
    t.log.info({ agent: t.agentId }, 'signal: typed into tmux pane');
    return { ...base, delivery: 'send_keys', run_id: null, done: true, ok: true };
  }

  if (t.spec.pty) {
    if (!t.running?.terminal) throw notRunning('type into its terminal');
    t.running.terminal.write(`${prompt}\r`);
    t.log.info({ agent: t.agentId }, 'signal: typed into PTY');
    return { ...base, delivery: 'pty_input', run_id: null, done: true, ok: true };
  }

  const runId = newId('run', t.clock.now());
  const abort = new AbortController();
  t.log.info({ agent: t.agentId, run_id: runId }, 'signal: one-shot run');
  const run = t.runtimes.run({
    runtime: t.spec.runtime,
    prompt,
    workdir: t.cwd,
    agentId: t.agentId,
    runId,
    ...(t.spec.command ? { command: t.spec.command } : {}),
    env: t.spec.env,
    signal: abort.signal,
    logFile: t.logFile,
  });
  if (!opts.wait) {
    t.track(run, abort);
    return { ...base, delivery: 'one_shot', run_id: runId, done: false, ok: null };
  }
  const r = await run;
  return {
    ...base,
    delivery: 'one_shot',
    run_id: runId,
    done: true,
    ok: r.ok,
    exit_code: r.exit_code,
    failure: r.failure,
    summary: r.summary,
  };
}
