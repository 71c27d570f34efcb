// Capability matching: an agent may take a task when it has every capability the task
// requires. Pure; both stores' claims and broadcast creation decide with it.
import type { AgentRow } from './migrations.js';

/** `agent.capabilities` (a JSON array) includes every one of `required`. */
export function hasCapabilities(agent: Pick<AgentRow, 'capabilities'>, required: readonly string[]): boolean {
  if (required.length === 0) return true;
  const have = new Set(JSON.parse(agent.capabilities) as string[]);
  return required.every((c) => have.has(c));
}
