// Approvals: pending ones with approve/reject and a reason; decided ones read-only.
import { useCallback, useEffect, useState } from 'preact/hooks';
import type { Approval } from '../../../src/protocol/approvals.js';
import { ApiError, api, listAll } from '../api.js';
import { Ref, Time } from '../ui.js';

export function ApprovalsView() {
  const [items, setItems] = useState<Approval[] | null>(null);
  const [error, setError] = useState<string | null>(null);
  const [notice, setNotice] = useState<string | null>(null);
  const load = useCallback(async () => {
    try {
      setItems(await listAll<Approval>('/approvals?limit=200'));
      setError(null);
    } catch (e) {
      setError(e instanceof ApiError ? e.detail : String(e));
    }
  }, []);
  useEffect(() => {
    void load();
  }, [load]);
  const decide = async (a: Approval, decision: 'approve' | 'reject', reason: string) => {
    setNotice(null);
    try {
      await api('POST', `/approvals/${encodeURIComponent(a.id)}/${decision}`, reason ? { reason } : {});
      setNotice(`${decision === 'approve' ? 'Approved' : 'Rejected'} “${a.title}”.`);
      setError(null);
    } catch (e) {
      setError(e instanceof ApiError ? e.detail : String(e));
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
      {error && (
        <p role="alert" class="error">
          {error}
        </p>
      )}
      {notice && (
        <p role="status" class="ok">
          {notice}
        </p>
      )}
      <h3>Pending</h3>
      {pending.length === 0 && <p class="muted">Nothing waiting.</p>}
      <ul class="cards" data-testid="pending">
        {pending.map((a) => (
          <PendingCard key={a.id} a={a} decide={decide} />
        ))}
      </ul>
      <h3>Decided</h3>
      <table data-testid="decided">
        <tbody>
          {decided.map((a) => (
            <tr key={a.id}>
              <td>{a.title}</td>
              <td class={a.status === 'approved' ? 'ok' : 'error'}>{a.status}</td>
              <td>{a.reason ?? ''}</td>
              <td class="muted">{a.decided_at ? <Time iso={a.decided_at} now={now} /> : ''}</td>
            </tr>
          ))}
        </tbody>
      </table>
    </section>
  );
}

function PendingCard(props: {
  a: Approval;
  decide: (a: Approval, d: 'approve' | 'reject', reason: string) => Promise<void>;
}) {
  const { a } = props;
  const [reason, setReason] = useState('');
  const [busy, setBusy] = useState(false);
  const act = async (d: 'approve' | 'reject') => {
    setBusy(true);
    await props.decide(a, d, reason.trim());
    setBusy(false);
  };
  return (
    <li class="card">
      <h4>{a.title}</h4>
      {a.detail && <p>{a.detail}</p>}
      <p class="muted">
        <Ref kind="domain" id={a.domain_id} />
        {a.agent_id && (
          <>
            {' · asked by '}
            <Ref kind="agent" id={a.agent_id} />
          </>
        )}
      </p>
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
    </li>
  );
}
