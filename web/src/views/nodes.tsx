// Nodes (online state) and the agents enrolled on them (runtime, status). Read-only for now.
import { useEffect, useState } from 'preact/hooks';
import { ApiError, listAll } from '../api.js';

interface Node {
  id: string;
  hostname: string;
  online: boolean;
}

interface Agent {
  id: string;
  node_id: string;
  domain_id: string;
  name: string;
  runtime: string;
  capabilities: string[];
  status: string;
}

export function NodesView() {
  const [nodes, setNodes] = useState<Node[] | null>(null);
  const [agents, setAgents] = useState<Agent[]>([]);
  const [error, setError] = useState<string | null>(null);
  useEffect(() => {
    let live = true;
    const load = async () => {
      try {
        const [ns, as] = await Promise.all([listAll<Node>('/nodes'), listAll<Agent>('/agents')]);
        if (!live) return;
        setNodes(ns);
        setAgents(as);
        setError(null);
      } catch (e) {
        if (live) setError(e instanceof ApiError ? e.detail : String(e));
      }
    };
    void load();
    // Presence changes are not feed events yet: refresh while the view is open.
    const t = setInterval(load, 5000);
    return () => {
      live = false;
      clearInterval(t);
    };
  }, []);
  if (!nodes && !error) return <p class="muted">Loading…</p>;
  return (
    <section>
      <h2>Nodes and agents</h2>
      {error && (
        <p role="alert" class="error">
          {error}
        </p>
      )}
      {(nodes ?? []).length === 0 && <p class="muted">No nodes registered.</p>}
      <ul class="cards" data-testid="nodes">
        {(nodes ?? []).map((n) => (
          <li key={n.id} class="card">
            <h3>
              {n.hostname}{' '}
              <span class={n.online ? 'ok' : 'muted'} data-testid="node-state">
                {n.online ? 'online' : 'offline'}
              </span>
            </h3>
            <p class="muted mono">{n.id}</p>
            <table>
              <tbody>
                {agents
                  .filter((a) => a.node_id === n.id)
                  .map((a) => (
                    <tr key={a.id}>
                      <td>{a.name}</td>
                      <td>{a.runtime}</td>
                      <td>{a.status}</td>
                      <td class="muted mono">{a.id}</td>
                      <td>
                        <a href={`#/attach/${encodeURIComponent(a.id)}`} aria-label={`Terminal of ${a.name}`}>
                          Terminal
                        </a>
                      </td>
                    </tr>
                  ))}
              </tbody>
            </table>
          </li>
        ))}
      </ul>
    </section>
  );
}
