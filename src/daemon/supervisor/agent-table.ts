// The supervisor's table of agents (one record per [[agent]] of agents.toml) and the
// reload plan: which agents a new agents.toml/config.toml adds, removes, changes or leaves
// alone. The plan is a pure function of fingerprints; carrying it out is supervisor.ts's.
import type { ReloadResult } from '../../protocol/agents.js';
import { SvcError } from '../../protocol/errors.js';
import type { Agent } from './agent.js';

export class AgentTable {
  private readonly agents = new Map<string, Agent>();

  /** Where agents.toml is, for the error an unknown agent gets. */
  constructor(private readonly agentsToml: string) {}

  get size(): number {
    return this.agents.size;
  }

  /** By id only (the watchdog, attach). */
  get(id: string): Agent | undefined {
    return this.agents.get(id);
  }

  /** By id, profile, or (mux_hosted) tmux session name; agent_not_found otherwise. */
  find(idOrName: string): Agent {
    const all = [...this.agents.values()];
    const a =
      this.agents.get(idOrName) ??
      all.find((x) => x.spec.profile === idOrName) ??
      all.find((x) => x.spec.runtime === 'mux_hosted' && x.unitName === idOrName);
    if (!a) {
      throw new SvcError(
        'agent_not_found',
        `no agent "${idOrName}" in ${this.agentsToml} (by id, profile or session); see "svc agent supervise list"`,
      );
    }
    return a;
  }

  has(id: string): boolean {
    return this.agents.has(id);
  }

  set(a: Agent): void {
    this.agents.set(a.spec.id, a);
  }

  delete(id: string): void {
    this.agents.delete(id);
  }

  /** Whether `a` is still the table's record of its id (a reload may have replaced it). */
  holds(a: Agent): boolean {
    return this.agents.get(a.spec.id) === a;
  }

  all(): Agent[] {
    return [...this.agents.values()];
  }

  ids(): string[] {
    return [...this.agents.keys()];
  }
}

/**
 * What a reload does, from the fingerprints of the running agents (in table order) and of the
 * new specs (in file order): removed = running, not in the file; added = in the file, not
 * running; changed = a different fingerprint (restarted); unchanged = the same (left alone).
 */
export function planReload(
  running: ReadonlyMap<string, string>,
  next: readonly { id: string; fingerprint: string }[],
): ReloadResult {
  const ids = new Set(next.map((n) => n.id));
  const result: ReloadResult = { added: [], removed: [], changed: [], unchanged: [] };
  for (const id of running.keys()) if (!ids.has(id)) result.removed.push(id);
  for (const n of next) {
    const before = running.get(n.id);
    if (before === undefined) result.added.push(n.id);
    else if (before === n.fingerprint) result.unchanged.push(n.id);
    else result.changed.push(n.id);
  }
  return result;
}
