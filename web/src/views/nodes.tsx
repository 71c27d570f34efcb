// Nodes (online state) and their agents: what the tower knows (enrolment, runtime, presence)
// and, for online nodes, what svcd reports through GET /nodes/{id}/status: supervision state
// with restart/pause/resume, and cron jobs with their next fire and last outcome.
import { useCallback, useEffect, useState } from 'preact/hooks';
import type { AgentStatus } from '../../../src/protocol/agents.js';
import type { Agent } from '../../../src/protocol/mesh.js';
import type { Node, NodeStatus } from '../../../src/protocol/nodes.js';
import { api, errorText, listAll } from '../api.js';
import { bytes, duration } from '../format.js';
import { CopyButton, Outcome, Time, useNow } from '../ui.js';

const time = (iso: string | null) => (iso ? new Date(iso).toLocaleString() : '—');

/** CPU (percent of a core since the previous look, else CPU time so far) and resident memory. */
function Usage(props: { s: AgentStatus }) {
  const u = props.s.usage;
  if (!u) return <span class="muted">—</span>;
  return (
    <span data-testid="usage" title={`CPU time ${duration(u.cpu_seconds * 1000)} since start`}>
      {u.cpu_percent !== null ? `${u.cpu_percent.toFixed(1)}% CPU` : `${duration(u.cpu_seconds * 1000)} CPU`}
      <div class="muted">{bytes(u.rss_bytes)}</div>
    </span>
  );
}

export function NodesView() {
  const [nodes, setNodes] = useState<Node[] | null>(null);
  const [agents, setAgents] = useState<Agent[]>([]);
  const [error, setError] = useState<string | null>(null);
  const load = useCallback(async () => {
    try {
      const [ns, as] = await Promise.all([listAll<Node>('/nodes'), listAll<Agent>('/agents')]);
      setNodes(ns);
      setAgents(as);
      setError(null);
    } catch (e) {
      setError(errorText(e));
    }
  }, []);
  useEffect(() => {
    void load();
    // Presence changes are not feed events: refresh while the view is open.
    const t = setInterval(load, 5000);
    return () => clearInterval(t);
  }, [load]);
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
      <div class="nodes" data-testid="nodes">
        {(nodes ?? []).map((n) => (
          <NodeCard key={n.id} node={n} agents={agents.filter((a) => a.node_id === n.id)} />
        ))}
      </div>
    </section>
  );
}

function NodeCard(props: { node: Node; agents: Agent[] }) {
  const { node } = props;
  const [status, setStatus] = useState<NodeStatus | null>(null);
  const [error, setError] = useState<string | null>(null);
  const [notice, setNotice] = useState<string | null>(null);
  const [busy, setBusy] = useState<string | null>(null);
  const load = useCallback(async () => {
    if (!node.online) {
      setStatus(null);
      return;
    }
    try {
      setStatus(await api<NodeStatus>('GET', `/nodes/${encodeURIComponent(node.id)}/status`));
      setError(null);
    } catch (e) {
      setError(errorText(e));
    }
  }, [node.id, node.online]);
  useEffect(() => {
    void load();
    const t = setInterval(load, 5000);
    return () => clearInterval(t);
  }, [load]);

  const act = async (agentId: string, label: string, action: 'restart' | 'pause' | 'resume') => {
    setBusy(`${agentId}:${action}`);
    setNotice(null);
    try {
      const after = await api<AgentStatus>(
        'POST',
        `/nodes/${encodeURIComponent(node.id)}/agents/${encodeURIComponent(agentId)}/actions`,
        { action },
      );
      const verb = { restart: 'Restarted', pause: 'Paused', resume: 'Resumed' }[action];
      setNotice(`${verb} ${label}: ${after.state}${after.paused ? ', paused' : ''}.`);
      setError(null);
    } catch (e) {
      setError(errorText(e));
    } finally {
      setBusy(null);
    }
    await load();
  };

  const nameOf = (id: string) => props.agents.find((a) => a.id === id)?.name ?? id;
  const now = useNow();

  return (
    <article class="card node" aria-label={`node ${node.hostname}`}>
      <h3>
        {node.hostname}{' '}
        <span class={node.online ? 'ok' : 'muted'} data-testid="node-state">
          {node.online ? 'online' : 'offline'}
        </span>
      </h3>
      <p class="muted mono">
        {node.id} <CopyButton text={node.id} label={`Copy id of node ${node.hostname}`} />
      </p>
      <Outcome error={error} notice={notice} />
      {!node.online && (
        <p class="muted">Offline: supervision and cron are shown while its svcd is connected.</p>
      )}
      {status && (
        <>
          <h4>Supervised agents</h4>
          {status.agents.length === 0 && <p class="muted">None in agents.toml.</p>}
          {status.agents.length > 0 && (
            <table data-testid="supervision">
              <thead>
                <tr>
                  <th>agent</th>
                  <th>state</th>
                  <th>runtime</th>
                  <th>cpu / memory</th>
                  <th>restarts</th>
                  <th>last restart</th>
                  <th />
                </tr>
              </thead>
              <tbody>
                {status.agents.map((s) => {
                  const label = nameOf(s.id);
                  const enrolled = props.agents.find((a) => a.id === s.id);
                  return (
                    <tr key={s.id} data-agent={s.id}>
                      <td>
                        <span title={`agent ${s.id}`}>{label}</span>{' '}
                        <CopyButton text={s.id} label={`Copy id of agent ${label}`} />
                        {s.started_at && (
                          <div class="muted">
                            up since <Time iso={s.started_at} now={now} />
                          </div>
                        )}
                      </td>
                      <td data-testid="unit-state">
                        <span class={s.state === 'running' ? 'ok' : s.state === 'dead' ? 'error' : ''}>
                          {s.state}
                        </span>
                        {s.paused && <span class="muted"> · paused</span>}
                        {s.gave_up_until && (
                          <span class="error"> · gave up until {time(s.gave_up_until)}</span>
                        )}
                        {s.pid !== null && <div class="muted mono">pid {s.pid}</div>}
                      </td>
                      <td>
                        {s.runtime} <span class="muted">({s.backend})</span>
                      </td>
                      <td>
                        <Usage s={s} />
                      </td>
                      <td data-testid="restarts">{s.restarts}</td>
                      <td class="muted">
                        {s.last_restart_at ? (
                          <>
                            <Time iso={s.last_restart_at} now={now} /> ({s.last_restart_reason ?? ''})
                          </>
                        ) : (
                          '—'
                        )}
                      </td>
                      <td class="actions">
                        <button
                          type="button"
                          disabled={busy !== null}
                          onClick={() => act(s.id, label, 'restart')}
                          aria-label={`Restart ${label}`}
                        >
                          Restart
                        </button>
                        {s.paused ? (
                          <button
                            type="button"
                            disabled={busy !== null}
                            onClick={() => act(s.id, label, 'resume')}
                            aria-label={`Resume ${label}`}
                          >
                            Resume
                          </button>
                        ) : (
                          <button
                            type="button"
                            disabled={busy !== null}
                            onClick={() => act(s.id, label, 'pause')}
                            aria-label={`Pause ${label}`}
                            title="Pause supervision: the watchdog leaves the agent alone"
                          >
                            Pause
                          </button>
                        )}
                        {s.log_file && (
                          <CopyButton text={`svc logs ${s.id} -f`} label={`Copy the log command of ${label}`}>
                            Log
                          </CopyButton>
                        )}
                        {s.pty && enrolled && (
                          <a
                            href={`#/attach/${encodeURIComponent(s.id)}`}
                            aria-label={`Terminal of ${label}`}
                          >
                            Terminal
                          </a>
                        )}
                      </td>
                    </tr>
                  );
                })}
              </tbody>
            </table>
          )}
          <h4>Cron jobs {status.cron && <span class="muted">({status.cron.timezone})</span>}</h4>
          {status.cron?.config_error && (
            <p class="error">
              cron.toml is invalid (the previous jobs stay in force): {status.cron.config_error}
            </p>
          )}
          {(status.cron?.jobs.length ?? 0) === 0 && <p class="muted">No cron jobs.</p>}
          {status.cron && status.cron.jobs.length > 0 && (
            <table data-testid="cron">
              <thead>
                <tr>
                  <th>job</th>
                  <th>when</th>
                  <th>next fire</th>
                  <th>last outcome</th>
                </tr>
              </thead>
              <tbody>
                {status.cron.jobs.map((j) => (
                  <tr key={j.name}>
                    <td>
                      {j.name} <span class="muted">({j.dispatch})</span>
                    </td>
                    <td class="mono">{j.schedule ?? `every ${j.interval}`}</td>
                    <td>
                      {j.enabled ? (j.next_fire_local ?? time(j.next_fire)) : 'disabled'}
                      {j.running && <span class="ok"> · running</span>}
                    </td>
                    <td data-testid="cron-last">
                      {j.last_fire ? (
                        <>
                          <span
                            class={
                              j.last_fire.outcome === 'ok' || j.last_fire.outcome === 'running'
                                ? 'ok'
                                : 'error'
                            }
                          >
                            {j.last_fire.outcome}
                          </span>{' '}
                          <span class="muted">
                            {time(j.last_fire.scheduled_minute)}
                            {j.last_fire.exit_code !== null ? ` · exit ${j.last_fire.exit_code}` : ''}
                            {j.last_fire.detail ? ` · ${j.last_fire.detail}` : ''}
                          </span>
                        </>
                      ) : (
                        <span class="muted">never fired</span>
                      )}
                    </td>
                  </tr>
                ))}
              </tbody>
            </table>
          )}
        </>
      )}
      <h4>Enrolled agents</h4>
      {props.agents.length === 0 && <p class="muted">None.</p>}
      <table data-testid="enrolled">
        <tbody>
          {props.agents.map((a) => (
            <tr key={a.id}>
              <td>
                <span title={`agent ${a.id}`}>{a.name}</span>{' '}
                <CopyButton text={a.id} label={`Copy id of agent ${a.name}`} />
              </td>
              <td>{a.runtime}</td>
              <td>{a.status}</td>
              <td class="muted">
                enrolled <Time iso={a.created_at} now={now} />
              </td>
            </tr>
          ))}
        </tbody>
      </table>
    </article>
  );
}
