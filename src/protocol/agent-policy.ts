// Governed agent runs (docs/agents.md, Permission policy): rules that decide what a task's
// subagent may do when its ACP agent asks permission for a tool call. Shared by config.toml
// on the node ([agent_policy]) and a mission's `agent_policy` field on the tower.
import { type Static, Type } from './type.js';

/** ACP's tool call kinds (agentclientprotocol.com, ToolKind). */
export const TOOL_KINDS = [
  'read',
  'edit',
  'delete',
  'move',
  'search',
  'execute',
  'think',
  'fetch',
  'switch_mode',
  'other',
] as const;
export type ToolKind = (typeof TOOL_KINDS)[number];

export const POLICY_ACTIONS = ['allow', 'deny', 'ask'] as const;
export type PolicyAction = (typeof POLICY_ACTIONS)[number];

/** `safe`: the documented default rules after the configured ones; `allow_all`: allow the rest. */
export const POLICY_PRESETS = ['safe', 'allow_all'] as const;
export type PolicyPreset = (typeof POLICY_PRESETS)[number];

const ToolKindSchema = Type.Union(TOOL_KINDS.map((k) => Type.Literal(k)));
const Glob = Type.String({ minLength: 1, maxLength: 1000 });

/**
 * One rule: every condition given must hold (an absent one always does); the first rule that
 * matches a tool call decides. Globs: `*` any run of characters (in paths: not `/`), `**` any
 * run including `/`, `?` one character.
 */
export const PolicyRule = Type.Object(
  {
    kind: Type.Optional(Type.Array(ToolKindSchema, { minItems: 1, maxItems: TOOL_KINDS.length })),
    title: Type.Optional(Glob),
    command: Type.Optional(Glob),
    /** Some path of the call matches (absolute, or relative to the working directory). */
    path: Type.Optional(Glob),
    /** true: some path is outside the working directory (or the call names none); false: all inside. */
    outside_workdir: Type.Optional(Type.Boolean()),
    action: Type.Union(POLICY_ACTIONS.map((a) => Type.Literal(a))),
  },
  { additionalProperties: false },
);
export type PolicyRule = Static<typeof PolicyRule>;

/** A mission's override: its rules come before the node's; its preset, when set, replaces the node's. */
export const MissionAgentPolicy = Type.Object(
  {
    preset: Type.Optional(Type.Union(POLICY_PRESETS.map((p) => Type.Literal(p)))),
    rules: Type.Array(PolicyRule, { maxItems: 200 }),
  },
  { additionalProperties: false },
);
export type MissionAgentPolicy = Static<typeof MissionAgentPolicy>;
