// The permission policy of governed runs (docs/agents.md, Permission policy): which tool calls
// a task's subagent may make (allow), may not (deny), or must have an operator decide (ask).
// Pure: the facts of one call and the rules in force → a decision. No I/O, no clock.
import { isAbsolute, relative, resolve } from 'node:path';
import {
  type MissionAgentPolicy,
  type PolicyAction,
  type PolicyPreset,
  type PolicyRule,
  TOOL_KINDS,
  type ToolKind,
} from '../../protocol/agent-policy.js';

/** What a rule can see of one ACP tool call. */
export interface ToolCallFacts {
  kind: ToolKind;
  title: string;
  /** The command line of an execute call (rawInput.command), else null. */
  command: string | null;
  /** Absolute paths the call touches (locations and rawInput path fields). */
  paths: string[];
}

/** The rules a run is governed by: the mission's first, then the node's, then the preset. */
export interface EffectivePolicy {
  mission: PolicyRule[];
  node: PolicyRule[];
  preset: PolicyPreset;
}

export interface PolicyDecision {
  action: PolicyAction;
  /** Which rule decided: "mission rule 2", "node rule 1", "default (safe)". */
  by: string;
}

/**
 * The documented safe default: reading, searching and thinking are allowed, and editing
 * inside the working directory; everything else (execute, edit outside it, delete, move,
 * fetch, switch_mode, other) is asked.
 */
export const SAFE_RULES: readonly PolicyRule[] = [
  { kind: ['read', 'search', 'think'], action: 'allow' },
  { kind: ['edit'], outside_workdir: false, action: 'allow' },
  { action: 'ask' },
];

export function effectivePolicy(
  node: { rules: PolicyRule[]; preset: PolicyPreset },
  mission: MissionAgentPolicy | null,
): EffectivePolicy {
  return { mission: mission?.rules ?? [], node: node.rules, preset: mission?.preset ?? node.preset };
}

export function decide(policy: EffectivePolicy, call: ToolCallFacts, workdir: string): PolicyDecision {
  const layers: [string, readonly PolicyRule[]][] = [
    ['mission rule', policy.mission],
    ['node rule', policy.node],
  ];
  for (const [name, rules] of layers) {
    const i = rules.findIndex((r) => matches(r, call, workdir));
    if (i >= 0) return { action: (rules[i] as PolicyRule).action, by: `${name} ${i + 1}` };
  }
  if (policy.preset === 'allow_all') return { action: 'allow', by: 'default (allow_all)' };
  const rule = SAFE_RULES.find((r) => matches(r, call, workdir)) as PolicyRule;
  return { action: rule.action, by: 'default (safe)' };
}

export function matches(rule: PolicyRule, call: ToolCallFacts, workdir: string): boolean {
  if (rule.kind && !rule.kind.includes(call.kind)) return false;
  if (rule.title !== undefined && !globMatch(rule.title, call.title, false)) return false;
  if (rule.command !== undefined && (call.command === null || !globMatch(rule.command, call.command, false)))
    return false;
  if (rule.path !== undefined) {
    const hit = call.paths.some(
      (p) =>
        globMatch(rule.path as string, p, true) || globMatch(rule.path as string, relative(workdir, p), true),
    );
    if (!hit) return false;
  }
  if (rule.outside_workdir !== undefined) {
    // A call that names no path cannot be shown to stay inside: it counts as outside.
    const outside = call.paths.length === 0 || call.paths.some((p) => !isInside(workdir, p));
    if (outside !== rule.outside_workdir) return false;
  }
  return true;
}

function isInside(dir: string, path: string): boolean {
  const rel = relative(dir, path);
  return rel === '' || (!rel.startsWith('..') && !isAbsolute(rel));
}

const globCache = new Map<string, RegExp>();

/** `*` any run (in paths: without `/`), `**` any run, `?` one character; the rest literal. */
export function globMatch(glob: string, text: string, path: boolean): boolean {
  const key = `${path ? 'p' : 't'}${glob}`;
  let re = globCache.get(key);
  if (!re) {
    let src = '';
    for (let i = 0; i < glob.length; i++) {
      const c = glob[i] as string;
      if (c === '*' && glob[i + 1] === '*') {
        src += '.*';
        i++;
      } else if (c === '*') src += path ? '[^/]*' : '.*';
      else if (c === '?') src += path ? '[^/]' : '.';
      else src += c.replace(/[.+^${}()|[\]\\]/g, '\\$&');
    }
    re = new RegExp(`^${src}$`, 's');
    if (globCache.size > 1000) globCache.clear();
    globCache.set(key, re);
  }
  return re.test(text);
}

/** The ACP tool call fields the facts come from (ToolCallUpdate of session/request_permission). */
export interface AcpToolCall {
  toolCallId: string;
  title?: string | null;
  kind?: string | null;
  rawInput?: unknown;
  locations?: { path: string }[] | null;
}

/** rawInput fields vendor agents put paths in (cwd: an execute call run elsewhere touches that place). */
const PATH_KEYS = ['path', 'file_path', 'filePath', 'abs_path', 'source', 'destination', 'target', 'cwd'];

export function toolCallFacts(call: AcpToolCall, workdir: string): ToolCallFacts {
  const kind = (TOOL_KINDS as readonly string[]).includes(call.kind ?? '')
    ? (call.kind as ToolKind)
    : 'other';
  const input = isRecord(call.rawInput) ? call.rawInput : {};
  const raw = input.command ?? input.cmd;
  const command =
    typeof raw === 'string'
      ? raw
      : Array.isArray(raw) && raw.every((a) => typeof a === 'string')
        ? raw.join(' ')
        : null;
  const paths = new Set<string>();
  for (const l of call.locations ?? []) if (typeof l.path === 'string') paths.add(resolve(workdir, l.path));
  for (const k of PATH_KEYS) {
    const v = input[k];
    if (typeof v === 'string' && v !== '') paths.add(resolve(workdir, v));
  }
  return { kind, title: call.title ?? call.toolCallId, command, paths: [...paths] };
}

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}
