// The environment of an agent process: svcd's own environment minus its credentials, the
// runtime's and the agent's extra variables, the secrets session, and identity markers.
import { UNIT_MARKER_ENV } from '../process/group.js';

/** SVC_* variables an agent may see; every other SVC_* (tokens, node JWT paths) is withheld. */
const PASSED_SVC_VARS = new Set([
  'SVC_HOME',
  'SVC_BASE_URL',
  'SVC_ALLOW_INSECURE',
  'SVC_SCHEMA_PACK_FILE',
  'SVC_SKILLS_HOME',
]);

export interface AgentEnvParts {
  base: NodeJS.ProcessEnv;
  /** [runtime.<kind>] env, then agents.toml env (later wins). */
  extra: Record<string, string>[];
  agentId: string;
  /** Marker for orphan detection (process/group.ts): the unit or run this process belongs to. */
  unit: string;
  /** SVC_SECRETS_SOCKET and SVC_SECRETS_SESSION of this run. */
  session: Record<string, string>;
  taskId?: string;
}

/** svcd's environment without what agents must not inherit (credentials, tmux client vars). */
export function withoutCredentials(base: NodeJS.ProcessEnv): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(base)) {
    if (v === undefined) continue;
    if (k.startsWith('SVC_') && !PASSED_SVC_VARS.has(k)) continue;
    if (k === 'TMUX' || k === 'TMUX_PANE') continue;
    env[k] = v;
  }
  return env;
}

export function agentEnv(p: AgentEnvParts): NodeJS.ProcessEnv {
  const env = withoutCredentials(p.base);
  for (const e of p.extra) Object.assign(env, e);
  env.SVC_AGENT_ID = p.agentId;
  env[UNIT_MARKER_ENV] = p.unit;
  if (p.taskId !== undefined) env.SVC_TASK_ID = p.taskId;
  // Last, so no configuration can point an agent at another session.
  Object.assign(env, p.session);
  return env;
}
