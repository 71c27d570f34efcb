// Agent runtime kinds (docs/agents.md, Runtime kinds): how svcd starts an agent and talks to it.
import { Type } from './type.js';

export const RUNTIME_KINDS = [
  'alpha_code',
  'alpha_agent_acp',
  'beta_cli',
  'gamma_cli',
  'mux_hosted',
] as const;
export type RuntimeKind = (typeof RUNTIME_KINDS)[number];
export const RuntimeKindSchema = Type.Union(RUNTIME_KINDS.map((k) => Type.Literal(k)));

export function isRuntimeKind(s: unknown): s is RuntimeKind {
  return typeof s === 'string' && (RUNTIME_KINDS as readonly string[]).includes(s);
}
