// What each runtime kind is: how a prompt reaches it, what ends a run, and the command used
// when config.toml has no [runtime.<kind>] table (the reference agents, so a fresh install
// works offline). One file per kind holds its definition; this is the index of them.
import type { RuntimeKind } from '../../protocol/runtimes.js';
import { alphaAgentAcp } from './alpha_agent_acp.js';
import { alphaCode } from './alpha_code.js';
import { betaCli } from './beta_cli.js';
import type { RuntimeDefinition } from './definition.js';
import { gammaCli } from './gamma_cli.js';
import { muxHosted } from './mux_hosted.js';

export const RUNTIMES: Record<RuntimeKind, RuntimeDefinition> = {
  alpha_code: alphaCode,
  alpha_agent_acp: alphaAgentAcp,
  beta_cli: betaCli,
  gamma_cli: gammaCli,
  mux_hosted: muxHosted,
};
