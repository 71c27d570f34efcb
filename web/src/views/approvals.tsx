// Approvals: pending ones with approve/reject and a reason; decided ones read-only. An approval
// a task's agent asked shows the tool call and links to the task's page.
import { useCallback, useEffect, useState } from 'preact/hooks';
import type { Approval } from '../../../src/protocol/approvals.js';
import { errorText, listAll } from '../api.js';
import { Outcome, Ref, shortId, Time } from '../ui.js';
import { DecideForm, type Decision, decideApproval, ToolCall } from './approval-parts.js';

export function ApprovalsView() {
  const [items, setItems] = useState<Approval[] | null>(null);
  const [error, setError] = useState<string | null>(null);
  const [notice, setNotice] = useState<string | null>(null);
  const load = useCallback(async () => {
    try {
      setItems(await listAll<Approval>('/approvals?limit=200'));
      setError(null);
    } catch (e) {
      setError(errorText(e));
    }
  }, []);
  useEffect(() => {
    void load();
  }, [load]);
  const decide = async (a: Approval, decision: Decision, reason: string) => {
    setNotice(null);
    try {
      await decideApproval(a, decision, reason);
      setNotice(`${decision === 'approve' ? 'Approved' : 'Rejected'} “${a.title}”.`);
      setError(null);
    } catch (e) {
      setError(errorText(e));
    }
    await load();
  };
  if (!items && !error) return <p class="muted">Loading…</p>;
  const pending = (items ?? []).filter((a) => a.status === 'pending');
  const decided = (items ?? []).filter((a) => a.status !== 'pending');
  const now = Date.now();
  return (
    <section>
      <h2>Approvals</h2>
      <Outcome error={error} notice={notice} />
      <h3>Pending</h3>
      {pending.length === 0 && <p class="muted">Nothing waiting.</p>}
      <ul class="cards" data-testid="pending">
        {pending.map((a) => (
          <li key={a.id} class="card">
            {a.tool_call ? (
              <ToolCall a={a} />
            ) : (
              <>
                <h4>{a.title}</h4>
                {a.detail && <p>{a.detail}</p>}
              </>
            )}
            <p class="muted">
              <Ref kind="domain" id={a.domain_id} />
              {a.agent_id && (
                <>
                  {' · asked by '}
                  <Ref kind="agent" id={a.agent_id} />
                </>
              )}
              {a.task_id && (
                <>
                  {' · '}
                  <TaskLink id={a.task_id} />
                </>
              )}
            </p>
            <DecideForm a={a} decide={(d, reason) => decide(a, d, reason)} />
          </li>
        ))}
      </ul>
      <h3>Decided</h3>
      <table data-testid="decided">
        <tbody>
          {decided.map((a) => (
            <tr key={a.id}>
              <td>{a.title}</td>
              <td>{a.task_id ? <TaskLink id={a.task_id} /> : ''}</td>
              <td class={a.status === 'approved' ? 'ok' : 'error'}>{a.status}</td>
              <td>{a.reason ?? ''}</td>
              <td class="muted">{a.decided_by ?? ''}</td>
              <td class="muted">{a.decided_at ? <Time iso={a.decided_at} now={now} /> : ''}</td>
            </tr>
          ))}
        </tbody>
      </table>
    </section>
  );
}

function TaskLink(props: { id: string }) {
  return (
    <a href={`#/task/${encodeURIComponent(props.id)}`} title={`task ${props.id}`}>
      task {shortId(props.id)}
    </a>
  );
}
