// Submitting a mesh task: a modal dialog over the task list (the list stays where it was).
// The agent of an `assigned` task is chosen among the agents of the mission's domain.
import { useEffect, useRef, useState } from 'preact/hooks';
import type { MeshTask } from '../../../src/protocol/mesh.js';
import type { Mission } from '../../../src/protocol/records.js';
import { api, errorText } from '../api.js';
import { directory } from '../names.js';

export function SubmitDialog(props: {
  mission: Mission;
  onClose: () => void;
  onDone: (t: MeshTask | null, error: string) => void;
}) {
  const ref = useRef<HTMLDialogElement>(null);
  const [title, setTitle] = useState('');
  const [description, setDescription] = useState('');
  const [policy, setPolicy] = useState('first_claim');
  const [priority, setPriority] = useState('0');
  const [agent, setAgent] = useState('');
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<string | null>(null);
  useEffect(() => {
    const d = ref.current;
    if (d && !d.open) d.showModal();
    return () => d?.close();
  }, []);
  const agents = directory.agents.filter((a) => a.domain_id === props.mission.domain_id);
  const submit = async (e: Event) => {
    e.preventDefault();
    setBusy(true);
    try {
      const body: Record<string, unknown> = {
        title: title.trim(),
        description,
        claim_policy: policy,
        priority: Number(priority),
      };
      if (policy === 'assigned') body.assigned_agent_id = agent;
      const t = await api<MeshTask>(
        'POST',
        `/work/missions/${encodeURIComponent(props.mission.id)}/tasks`,
        body,
      );
      props.onDone(t, '');
      props.onClose();
    } catch (err) {
      // The dialog stays open with what was typed, and the API's detail.
      setError(errorText(err));
      props.onDone(null, errorText(err));
    } finally {
      setBusy(false);
    }
  };
  return (
    <dialog ref={ref} class="dialog" aria-label="Submit a task" onClose={props.onClose}>
      <form onSubmit={submit}>
        <h3>Submit a task to {props.mission.name}</h3>
        <label class="block">
          Title <input value={title} onInput={(e) => setTitle((e.target as HTMLInputElement).value)} />
        </label>
        <label class="block">
          Description{' '}
          <textarea
            rows={4}
            value={description}
            onInput={(e) => setDescription((e.target as HTMLTextAreaElement).value)}
          />
        </label>
        <div class="toolbar">
          <label>
            Policy{' '}
            <select value={policy} onChange={(e) => setPolicy((e.target as HTMLSelectElement).value)}>
              <option value="first_claim">first claim</option>
              <option value="assigned">assigned</option>
              <option value="broadcast">broadcast</option>
            </select>
          </label>
          {policy === 'assigned' && (
            <label>
              Agent{' '}
              <select value={agent} onChange={(e) => setAgent((e.target as HTMLSelectElement).value)}>
                <option value="">choose…</option>
                {agents.map((a) => (
                  <option key={a.id} value={a.id} title={a.id}>
                    {a.name} ({a.runtime})
                  </option>
                ))}
              </select>
            </label>
          )}
          <label>
            Priority{' '}
            <input
              type="number"
              min={-1000}
              max={1000}
              value={priority}
              class="narrow"
              onInput={(e) => setPriority((e.target as HTMLInputElement).value)}
            />
          </label>
        </div>
        {error && (
          <p role="alert" class="error">
            {error}
          </p>
        )}
        <div class="toolbar end">
          <button type="button" onClick={props.onClose}>
            Close
          </button>
          <button type="submit" class="primary" disabled={busy}>
            {busy ? 'Submitting…' : 'Submit task'}
          </button>
        </div>
      </form>
    </dialog>
  );
}
