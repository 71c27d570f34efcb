// The runtime API for one ephemeral agent run: a prompt, a working directory, a runtime
// kind → progress while it runs and a RunResult at the end. The task worker runs each mesh
// task through this; the supervisor uses it for `signal` on CLI kinds. Every run gets its
// own process group, secrets session (revoked at the end), output log and marker env.
import { join } from 'node:path';
import type { Clock } from '../../lib/clock.js';
import { iso, systemClock } from '../../lib/clock.js';
import { formatDuration } from '../../lib/duration.js';
import { newId } from '../../lib/ids.js';
import type { RuntimeKind } from '../../protocol/runtimes.js';
import { DEFAULT_ROTATION, RotatingLog, type RotationPolicy } from '../process/rotating-log.js';
import type { SecretSessions } from '../secrets/sessions.js';
import { AcpSession, describeExit } from './acp-session.js';
import { runCli } from './cli-run.js';
import type { RuntimeConfig } from './config-section.js';
import { agentEnv } from './env.js';
import { RUNTIMES } from './kinds.js';
import type { PermissionHandler } from './permission.js';
import type { ProgressUpdate } from './progress.js';
import { renderCommand, resolveSelf, selfCommand } from './template.js';

export interface RunRequest {
  runtime: RuntimeKind;
  prompt: string;
  /** Working directory (must exist); also {workdir}. */
  workdir: string;
  /** Who runs: the key secrets sessions are minted for, and the default log name. */
  agentId: string;
  /** {task_id} and SVC_TASK_ID (mesh tasks). */
  taskId?: string;
  /** Replaces the kind's config.toml template. */
  command?: string[];
  /** Extra environment (after the runtime's). */
  env?: Record<string, string>;
  /** Kill the run (whole process group) after this long: failure "timed out after …". */
  timeoutMs?: number;
  /** Abort = cancel: the run is stopped and fails with "cancelled". */
  signal?: AbortSignal;
  /** Progress while it runs (ACP session updates; CLI kinds report none). */
  onProgress?(u: ProgressUpdate): void;
  /** The agent's process started (pid = its process group id). */
  onSpawn?(pid: number): void;
  /** Output log; default $SVC_HOME/svcd/logs/<agentId>.log. */
  logFile?: string;
  /** Id of this run (default: a new run_… id), when the caller needs it before the result. */
  runId?: string;
  /** ACP: answers the agent's permission requests (default: allow). CLI kinds cannot be asked. */
  permission?: PermissionHandler;
}

export interface RunResult {
  run_id: string;
  runtime: RuntimeKind;
  ok: boolean;
  /** CLI kinds: the exit code (null if killed by a signal or never started). */
  exit_code: number | null;
  signal: string | null;
  /** ACP: the prompt's stop reason (end_turn = success). */
  stop_reason: string | null;
  /** Why the run failed, in words an operator can act on; null when ok. */
  failure: string | null;
  /** The agent's answer: ACP message text or the end of the CLI output (≤ 2 KiB). */
  summary: string;
  /** Last 8 KiB of output (CLI) or agent text (ACP). */
  output_tail: string;
  pid: number | null;
  started_at: string;
  finished_at: string;
  duration_ms: number;
  log_file: string;
}

export interface RuntimeRunner {
  run(req: RunRequest): Promise<RunResult>;
}

export interface RuntimeRunnerDeps {
  runtimes: RuntimeConfig;
  sessions: SecretSessions;
  logsDir: string;
  /** svcd's environment (credentials are stripped before agents see it). */
  baseEnv: NodeJS.ProcessEnv;
  clock: Clock;
  /** Real-time waits for process exit; default the system clock. */
  waits?: Clock;
  stopGraceMs?: number;
  rotation?: RotationPolicy;
  /** How "svcd" in templates is run; default this install. */
  self?: string[];
}

const SUMMARY_CHARS = 2048;

export function createRuntimeRunner(deps: RuntimeRunnerDeps): RuntimeRunner {
  const waits = deps.waits ?? systemClock;
  const self = deps.self ?? selfCommand();
  const stopGraceMs = deps.stopGraceMs ?? 10_000;
  return {
    async run(req) {
      const started = deps.clock.now();
      const runId = req.runId ?? newId('run', started);
      const template = req.command ?? deps.runtimes[req.runtime].command;
      const rendered = renderCommand(template, {
        prompt: req.prompt,
        task_id: req.taskId ?? '',
        workdir: req.workdir,
      });
      const argv = resolveSelf(rendered.argv, self);
      const logFile = req.logFile ?? join(deps.logsDir, `${req.agentId}.log`);
      const log = new RotatingLog(logFile, deps.rotation ?? DEFAULT_ROTATION);
      const session = deps.sessions.mint(req.agentId);
      const env = agentEnv({
        base: deps.baseEnv,
        extra: [deps.runtimes[req.runtime].env, req.env ?? {}],
        agentId: req.agentId,
        unit: runId,
        session: session.env,
        ...(req.taskId !== undefined ? { taskId: req.taskId } : {}),
      });
      log.mark(
        `run ${runId} (${req.runtime}${req.taskId ? `, task ${req.taskId}` : ''}) start: ${argv[0]}`,
        started,
      );
      const finish = (
        r: Omit<RunResult, 'run_id' | 'runtime' | 'started_at' | 'finished_at' | 'duration_ms' | 'log_file'>,
      ): RunResult => {
        const end = deps.clock.now();
        log.mark(`run ${runId} end: ${r.ok ? 'ok' : `failed: ${r.failure}`}`, end);
        return {
          run_id: runId,
          runtime: req.runtime,
          ...r,
          started_at: iso(started),
          finished_at: iso(end),
          duration_ms: end - started,
          log_file: logFile,
        };
      };
      try {
        if (RUNTIMES[req.runtime].protocol === 'acp') {
          return finish(await runAcp(req, argv, env, log));
        }
        const out = await runCli({
          argv,
          cwd: req.workdir,
          env,
          ...(rendered.promptInArgs ? {} : { stdin: req.prompt }),
          log,
          ...(req.timeoutMs !== undefined ? { timeoutMs: req.timeoutMs } : {}),
          ...(req.signal ? { signal: req.signal } : {}),
          stopGraceMs,
          clock: deps.clock,
          waits,
          ...(req.onSpawn ? { onSpawn: req.onSpawn } : {}),
        });
        const failure = out.spawnError
          ? `cannot start ${argv[0]}: ${out.spawnError}`
          : out.cancelled
            ? 'cancelled'
            : out.timedOut
              ? `timed out after ${formatDuration(req.timeoutMs ?? 0)}`
              : out.exitCode === 0
                ? null
                : describeExit({ code: out.exitCode, signal: out.signal });
        return finish({
          ok: failure === null,
          exit_code: out.exitCode,
          signal: out.signal,
          stop_reason: null,
          failure: failure === null ? null : withSudoHint(failure, out.outputTail),
          summary: lastChars(out.outputTail.trim(), SUMMARY_CHARS),
          output_tail: out.outputTail,
          pid: out.pid,
        });
      } finally {
        session.revoke();
        log.close();
      }
    },
  };

  async function runAcp(
    req: RunRequest,
    argv: string[],
    env: NodeJS.ProcessEnv,
    log: RotatingLog,
  ): Promise<
    Omit<RunResult, 'run_id' | 'runtime' | 'started_at' | 'finished_at' | 'duration_ms' | 'log_file'>
  > {
    const base = {
      exit_code: null,
      signal: null,
      stop_reason: null,
      summary: '',
      output_tail: '',
      pid: null,
    };
    if (req.signal?.aborted) return { ...base, ok: false, failure: 'cancelled' };
    let session: AcpSession;
    try {
      session = await AcpSession.start({
        argv,
        cwd: req.workdir,
        env,
        log,
        clock: deps.clock,
        waits,
        stopGraceMs,
        ...(req.onProgress ? { onProgress: req.onProgress } : {}),
        ...(req.permission ? { permission: req.permission } : {}),
      });
    } catch (e) {
      return { ...base, ok: false, failure: (e as Error).message };
    }
    req.onSpawn?.(session.pid);
    let timedOut = false;
    const timer =
      req.timeoutMs !== undefined
        ? deps.clock.setTimeout(() => {
            timedOut = true;
            void session.stop();
          }, req.timeoutMs)
        : null;
    try {
      const out = await session.prompt(req.prompt, {
        ...(req.onProgress ? { onProgress: req.onProgress } : {}),
        ...(req.signal ? { signal: req.signal } : {}),
      });
      const failure = timedOut
        ? `timed out after ${formatDuration(req.timeoutMs ?? 0)}`
        : req.signal?.aborted
          ? 'cancelled'
          : out.error !== null
            ? `agent error: ${out.error}`
            : out.stopReason === 'end_turn'
              ? null
              : `stop reason: ${out.stopReason}`;
      return {
        ...base,
        ok: failure === null,
        stop_reason: out.stopReason,
        failure: failure === null ? null : withSudoHint(failure, out.text),
        summary: lastChars(out.text.trim(), SUMMARY_CHARS),
        output_tail: out.text,
        pid: session.pid,
      };
    } finally {
      timer?.cancel();
      await session.stop();
    }
  }
}

function lastChars(s: string, n: number): string {
  return s.length > n ? s.slice(s.length - n) : s;
}

/** Agent subprocesses have no TTY (docs/worker.md): say so when sudo is why a run failed. */
export function withSudoHint(failure: string, output: string): string {
  if (/sudo: (a terminal is required|a password is required|no tty present)/.test(output)) {
    return `${failure} (sudo failed: agent subprocesses have no TTY; configure passwordless sudo for the commands the agent needs)`;
  }
  return failure;
}
