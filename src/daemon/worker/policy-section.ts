// [agent_policy] of config.toml (docs/agents.md, Permission policy): the node's rules for what
// task subagents may do, its preset, and how long an asked tool call waits for an operator.
import {
  POLICY_ACTIONS,
  POLICY_PRESETS,
  type PolicyPreset,
  type PolicyRule,
  TOOL_KINDS,
  type ToolKind,
} from '../../protocol/agent-policy.js';
import type { ConfigSection } from '../config/section.js';

export interface AgentPolicyConfig {
  preset: PolicyPreset;
  rules: PolicyRule[];
  /** An asked tool call with no decision after this long is rejected. */
  approvalTimeoutMs: number;
  /** How often a waiting run asks the tower about its approval (the control message's backstop). */
  approvalPollMs: number;
}

export const agentPolicySection: ConfigSection<AgentPolicyConfig> = {
  parse(t) {
    t?.onlyKeys(['preset', 'approval_timeout', 'approval_poll', 'rule']);
    const rules = (t?.tables('rule') ?? []).map((r): PolicyRule => {
      r.onlyKeys(['kind', 'title', 'command', 'path', 'outside_workdir', 'action']);
      const kind = r.stringArray('kind', { nonEmpty: true });
      const bad = kind?.find((k) => !(TOOL_KINDS as readonly string[]).includes(k));
      if (bad !== undefined)
        throw r.error('kind', `unknown tool kind "${bad}" (known: ${TOOL_KINDS.join(', ')})`);
      const action = r.oneOf('action', POLICY_ACTIONS);
      if (action === undefined) throw r.error('action', `is required (${POLICY_ACTIONS.join(', ')})`);
      const rule: PolicyRule = { action };
      if (kind) rule.kind = kind as ToolKind[];
      for (const k of ['title', 'command', 'path'] as const) {
        const v = r.string(k);
        if (v === '') throw r.error(k, 'must not be empty');
        if (v !== undefined) rule[k] = v;
      }
      const outside = r.boolean('outside_workdir');
      if (outside !== undefined) rule.outside_workdir = outside;
      return rule;
    });
    return {
      preset: t?.oneOf('preset', POLICY_PRESETS) ?? 'safe',
      rules,
      approvalTimeoutMs: t?.duration('approval_timeout') ?? 10 * 60_000,
      approvalPollMs: t?.duration('approval_poll') ?? 15_000,
    };
  },
};
