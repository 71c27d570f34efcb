// Who is who: the names of the domains, missions, agents and nodes the token may see, loaded
// once after sign-in and again (at most every 5 s) when the console meets an id it does not
// know yet, so views show names rather than ids (ui.tsx Ref).
import type { Agent } from '../../src/protocol/mesh.js';
import type { Node } from '../../src/protocol/nodes.js';
import type { Domain, Mission } from '../../src/protocol/records.js';
import { listAll } from './api.js';

export type RefKind = 'domain' | 'mission' | 'agent' | 'node';

const RELOAD_GAP_MS = 5000;

export class Directory {
  domains: Domain[] = [];
  missions: Mission[] = [];
  agents: Agent[] = [];
  nodes: Node[] = [];
  loaded = false;
  private byId = new Map<string, string>();
  private loading: Promise<void> | null = null;
  private lastLoad = 0;
  private listeners = new Set<() => void>();

  /** Loads every list (each one that the token may not read stays empty). */
  load(): Promise<void> {
    if (this.loading) return this.loading;
    this.lastLoad = Date.now();
    this.loading = (async () => {
      const quiet = async <T>(path: string): Promise<T[]> => {
        try {
          return await listAll<T>(path);
        } catch {
          return [];
        }
      };
      const [domains, agents, nodes] = await Promise.all([
        quiet<Domain>('/domains'),
        quiet<Agent>('/agents'),
        quiet<Node>('/nodes'),
      ]);
      const missions = (
        await Promise.all(domains.map((d) => quiet<Mission>(`/domains/${encodeURIComponent(d.id)}/m`)))
      ).flat();
      Object.assign(this, { domains, agents, nodes, missions, loaded: true });
      const m = new Map<string, string>();
      for (const d of domains) m.set(`domain:${d.id}`, d.name);
      for (const x of missions) m.set(`mission:${x.id}`, x.name);
      for (const a of agents) m.set(`agent:${a.id}`, a.name);
      for (const n of nodes) m.set(`node:${n.id}`, n.hostname);
      this.byId = m;
      this.loading = null;
      for (const fn of this.listeners) fn();
    })();
    return this.loading;
  }

  /** The name of `id`, or undefined (and a reload soon) when it is not known. */
  name(kind: RefKind, id: string): string | undefined {
    const n = this.byId.get(`${kind}:${id}`);
    if (n === undefined && this.loaded && !this.loading && Date.now() - this.lastLoad > RELOAD_GAP_MS)
      void this.load();
    return n;
  }

  clear(): void {
    Object.assign(this, { domains: [], missions: [], agents: [], nodes: [], loaded: false });
    this.byId = new Map();
  }

  subscribe(fn: () => void): () => void {
    this.listeners.add(fn);
    return () => this.listeners.delete(fn);
  }
}

export const directory = new Directory();
