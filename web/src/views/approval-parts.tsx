// Pieces of an approval both the Approvals view and a task's page show: the tool call a task's
// agent asked permission for, and the decision form (a reason, Approve / Reject).
import { useState } from 'preact/hooks';
import type { Approval } from '../../../src/protocol/approvals.js';
import { api } from '../api.js';

export type Decision = 'approve' | 'reject';

/** POST /approvals/{id}/approve|reject, with the reason when one was typed. */
export function decideApproval(a: Approval, d: Decision, reason: string): Promise<Approval> {
  return api<Approval>('POST', `/approvals/${encodeURIComponent(a.id)}/${d}`, reason ? { reason } : {});
}

/** The tool call: its kind, title, the rule that asked, and the input excerpt as sent. */
export function ToolCall(props: { a: Approval }) {
  const c = props.a.tool_call;
  if (!c) return null;
  return (
    <div class="tool-call" data-testid="tool-call">
      <p>
        <span class="kind">{c.kind}</span> <strong>{c.title}</strong>{' '}
        <span class="muted">· asked by {c.rule}</span>
      </p>
      {c.input && <pre class="output input">{c.input}</pre>}
    </div>
  );
}

/** A reason (optional) and the two decisions; `decide` reports and reloads. */
export function DecideForm(props: { a: Approval; decide: (d: Decision, reason: string) => Promise<void> }) {
  const { a } = props;
  const [reason, setReason] = useState('');
  const [busy, setBusy] = useState(false);
  const act = async (d: Decision) => {
    setBusy(true);
    await props.decide(d, reason.trim());
    setBusy(false);
  };
  return (
    <>
      <label>
        Reason for {a.title}{' '}
        <input value={reason} onInput={(e) => setReason((e.target as HTMLInputElement).value)} />
      </label>
      <div class="toolbar">
        <button type="button" disabled={busy} onClick={() => act('approve')}>
          Approve
        </button>
        <button type="button" disabled={busy} onClick={() => act('reject')}>
          Reject
        </button>
      </div>
    </>
  );
}
