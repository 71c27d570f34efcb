// Unit backends (docs/agents.md): one interface over the ways an agent can be kept running.
// process: svcd owns the child (plain, PTY or ACP); tmux: one session per mux_hosted agent,
// outliving svcd; systemd: a user unit per agent via `systemctl --user`.

import type { ExitInfo } from '../../process/group.js';
import type { RotationPolicy } from '../../process/rotating-log.js';
import type { AgentTerminal } from '../../process/terminal.js';
import type { AcpSession } from '../../runtimes/acp-session.js';
import type { ProgressUpdate } from '../../runtimes/progress.js';
import type { BackendKind } from '../agents-file.js';

export interface UnitLaunch {
  agentId: string;
  /** Unit name: svc-agent-<id> (systemd adds .service); the session name for tmux. */
  unit: string;
  /** Resolved argv (no placeholders, "svcd" already replaced). */
  argv: string[];
  cwd: string;
  /** The complete environment of the agent (secrets session and marker included). */
  env: NodeJS.ProcessEnv;
  logFile: string;
  rotation: RotationPolicy;
  /** process backend: plain child, pseudo-terminal, or ACP session over stdio. */
  mode: 'plain' | 'pty' | 'acp';
  /** ACP: session updates while no prompt of a signal is running. */
  onProgress?(u: ProgressUpdate): void;
  /** Human-readable runtime kind, for unit descriptions. */
  description: string;
}

export interface RunningUnit {
  readonly backend: BackendKind;
  readonly unit: string;
  /** Main pid (= process group id for process and tmux units), when known. */
  readonly pid: number | null;
  /** Resolves when svcd sees the unit end (process backend); null when only polling can tell. */
  readonly exited: Promise<ExitInfo> | null;
  /** Stops the whole unit (process group, tmux session, systemd cgroup). Idempotent. */
  stop(): Promise<void>;
  /** ACP agents: their session. */
  readonly acp?: AcpSession;
  /** PTY agents: their terminal. */
  readonly terminal?: AgentTerminal;
  /** tmux agents: types text and presses Enter. */
  sendKeys?(text: string): Promise<void>;
}

export interface UnitBackend {
  readonly kind: BackendKind;
  start(l: UnitLaunch): Promise<RunningUnit>;
  /** Which of these units are alive now (one probe for all of them where possible). */
  probe(units: readonly RunningUnit[]): Promise<Map<string, boolean>>;
  /**
   * At svcd start: a unit of this agent left running by a previous svcd. tmux and systemd
   * re-adopt it (returned); the process backend cannot (its stdio is gone), so it stops the
   * orphaned group `previousPid` if it carries the unit's marker, and returns null.
   */
  adopt(l: UnitLaunch, previousPid: number | null): Promise<RunningUnit | null>;
}
