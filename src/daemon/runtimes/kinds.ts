// What each runtime kind is: how a prompt reaches it, what ends a run, and the command used
// when config.toml has no [runtime.<kind>] table (the reference agents, so a fresh install
// works offline). One file per kind holds its definition; this is the index of them.
import type { RuntimeKind } from '../../protocol/runtimes.js';
import { alphaAgentAcp } from './alpha_agent_acp.js';
import { alphaCode } from './alpha_code.js';
import { betaCli } from './beta_cli.js';
import { gammaCli } from './gamma_cli.js';
import { muxHosted } from './mux_hosted.js';

export interface RuntimeDefinition {
  kind: RuntimeKind;
  /**
   * cli: one process per prompt, the result is its exit code and output.
   * acp: a persistent ACP session over stdio, the result of a prompt is its stop reason.
   * pane: a long-running interactive agent in a tmux pane, prompted by typing into it.
   */
  protocol: 'cli' | 'acp' | 'pane';
  summary: string;
  /** Used when config.toml has no [runtime.<kind>]: the package's reference agent. */
  defaultCommand: readonly string[];
  /** A vendor CLI as it is typically configured (documentation only). */
  example: readonly string[];
}

export const RUNTIMES: Record<RuntimeKind, RuntimeDefinition> = {
  alpha_code: alphaCode,
  alpha_agent_acp: alphaAgentAcp,
  beta_cli: betaCli,
  gamma_cli: gammaCli,
  mux_hosted: muxHosted,
};
