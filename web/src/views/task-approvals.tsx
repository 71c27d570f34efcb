// The task page's Approvals: every approval the task's agent asked (the tool call, its status,
// who decided and when, the reason), with Approve / Reject on a pending one. Read again when
// an approval event of the task arrives from the feed.
import { useCallback, useEffect, useState } from 'preact/hooks';
import type { Approval } from '../../../src/protocol/approvals.js';
import { errorText, listAll } from '../api.js';
import { Card, Outcome, Time } from '../ui.js';
import { DecideForm, type Decision, decideApproval, ToolCall } from './approval-parts.js';
import type { TaskSectionProps } from './task.js';

export function ApprovalsSection(p: TaskSectionProps) {
  const { id, domain_id: domainId } = p.task;
  const [items, setItems] = useState<Approval[]>([]);
  const [error, setError] = useState<string | null>(null);
  const [notice, setNotice] = useState<string | null>(null);
  const load = useCallback(async () => {
    try {
      const q = new URLSearchParams({ task_id: id, domain_id: domainId, limit: '200' });
      // Oldest first (the list's order by id): the order the agent asked in.
      setItems(await listAll<Approval>(`/approvals?${q}`));
      setError(null);
    } catch (e) {
      setError(errorText(e));
    }
  }, [id, domainId]);
  const newest = p.events.find((e) => e.type === 'approval')?.id;
  useEffect(() => {
    void load();
  }, [load, newest]);

  const decide = async (a: Approval, d: Decision, reason: string) => {
    setNotice(null);
    try {
      await decideApproval(a, d, reason);
      setNotice(`${d === 'approve' ? 'Approved' : 'Rejected'} “${a.tool_call?.title ?? a.title}”.`);
      setError(null);
    } catch (e) {
      setError(errorText(e));
    }
    await load();
  };
  if (items.length === 0 && !error) return null;
  return (
    <Card title="Approvals" testid="task-approvals">
      <Outcome error={error} notice={notice} />
      <ol class="approvals">
        {items.map((a) => (
          <li key={a.id} data-status={a.status} data-approval={a.id}>
            {a.tool_call ? <ToolCall a={a} /> : <p>{a.title}</p>}
            <p>
              <span class={`state state-${a.status}`}>{a.status}</span>{' '}
              <span class="muted">
                asked <Time iso={a.created_at} now={p.now} />
                {a.decided_at && (
                  <>
                    {' · decided by '}
                    {a.decided_by ?? '?'} <Time iso={a.decided_at} now={p.now} />
                  </>
                )}
              </span>
              {a.reason && <span> · {a.reason}</span>}
            </p>
            {a.status === 'pending' && <DecideForm a={a} decide={(d, reason) => decide(a, d, reason)} />}
          </li>
        ))}
      </ol>
    </Card>
  );
}
