// Mesh tasks of one mission, grouped by state: submit, retry (failed only), cancel
// (pending/claimed/running), and the live progress of running tasks from the feed's
// `progress` events. The list reloads when a `matrix` event for the mission arrives.
import { useCallback, useEffect, useMemo, useRef, useState } from 'preact/hooks';
import type { FeedEvent } from '../../../src/protocol/events.js';
import type { MeshTask } from '../../../src/protocol/mesh.js';
import type { Domain, Mission } from '../../../src/protocol/records.js';
import { api, errorText, listAll } from '../api.js';
import { feedStore } from '../feed.js';

const STATES: MeshTask['state'][] = ['running', 'claimed', 'pending', 'failed', 'completed', 'cancelled'];
const CANCELLABLE = new Set(['pending', 'claimed', 'running']);

interface Progress {
  text: string;
  percent?: number;
}

/** The newest progress event of each task, from the feed (events are newest first). */
export function latestProgress(events: FeedEvent[]): Map<string, Progress> {
  const out = new Map<string, Progress>();
  for (const e of events) {
    if (e.type !== 'progress') continue;
    const p = e.payload as { task_id?: unknown; text?: unknown; percent?: unknown } | null;
    if (!p || typeof p.task_id !== 'string' || out.has(p.task_id)) continue;
    out.set(p.task_id, {
      text: typeof p.text === 'string' ? p.text : '',
      ...(typeof p.percent === 'number' ? { percent: p.percent } : {}),
    });
  }
  return out;
}

export function TasksView(props: { mission?: string | undefined }) {
  const [missions, setMissions] = useState<{ domain: Domain; mission: Mission }[] | null>(null);
  const [error, setError] = useState<string | null>(null);
  const [notice, setNotice] = useState<string | null>(null);
  const [tasks, setTasks] = useState<MeshTask[] | null>(null);
  const [, tick] = useState(0);
  useEffect(() => feedStore.subscribe(() => tick((n) => n + 1)), []);
  const missionId = props.mission ?? missions?.[0]?.mission.id;

  useEffect(() => {
    let live = true;
    (async () => {
      try {
        const ds = await listAll<Domain>('/domains');
        const all = await Promise.all(
          ds.map(async (d) =>
            (await listAll<Mission>(`/domains/${encodeURIComponent(d.id)}/m`)).map((m) => ({
              domain: d,
              mission: m,
            })),
          ),
        );
        if (live) setMissions(all.flat());
      } catch (e) {
        if (live) setError(errorText(e));
      }
    })();
    return () => {
      live = false;
    };
  }, []);

  const load = useCallback(async () => {
    if (!missionId) return;
    try {
      setTasks(await listAll<MeshTask>(`/work/missions/${encodeURIComponent(missionId)}/tasks?limit=500`));
    } catch (e) {
      setError(errorText(e));
    }
  }, [missionId]);
  useEffect(() => {
    setTasks(null);
    void load();
  }, [load]);

  // Reload when a task of this mission changes state (matrix event), at most every 250 ms.
  const lastSeen = useRef<string | null>(null);
  const newest = feedStore.events.find(
    (e) => e.type === 'matrix' && e.mission_id === missionId && isTaskEvent(e),
  )?.id;
  useEffect(() => {
    if (!newest || newest === lastSeen.current) return;
    const first = lastSeen.current === null;
    lastSeen.current = newest;
    if (first) return;
    const t = setTimeout(() => void load(), 250);
    return () => clearTimeout(t);
  }, [newest, load]);

  const progress = useMemo(() => latestProgress(feedStore.events), [feedStore.events]);

  const act = async (t: MeshTask, what: 'retry' | 'cancel') => {
    setNotice(null);
    try {
      const after = await api<MeshTask>('POST', `/work/tasks/${encodeURIComponent(t.id)}/${what}`, {});
      setNotice(`${what === 'retry' ? 'Retried' : 'Cancelled'} “${t.title}”: now ${after.state}.`);
      setError(null);
    } catch (e) {
      setError(errorText(e));
    }
    await load();
  };

  if (!missions && !error) return <p class="muted">Loading…</p>;
  return (
    <section>
      <h2>Tasks</h2>
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
      {missions && missions.length === 0 && <p class="muted">No missions: create one first.</p>}
      {missions && missions.length > 0 && (
        <div class="toolbar">
          <label>
            Mission{' '}
            <select
              value={missionId}
              onChange={(e) => {
                location.hash = `#/tasks/${encodeURIComponent((e.target as HTMLSelectElement).value)}`;
              }}
            >
              {missions.map(({ domain, mission }) => (
                <option key={mission.id} value={mission.id}>
                  {domain.name} / {mission.name}
                </option>
              ))}
            </select>
          </label>
        </div>
      )}
      {missionId && (
        <SubmitForm
          missionId={missionId}
          onDone={(t, err) => {
            if (t) {
              setNotice(`Submitted “${t.title}” (${t.id}).`);
              setError(null);
              void load();
            } else {
              setNotice(null);
              setError(err);
            }
          }}
        />
      )}
      {tasks && tasks.length === 0 && <p class="muted">No tasks in this mission yet.</p>}
      {tasks &&
        STATES.map((s) => {
          const rows = tasks.filter((t) => t.state === s);
          if (rows.length === 0) return null;
          return (
            <div key={s} data-testid={`tasks-${s}`}>
              <h3>
                {s} <span class="muted">({rows.length})</span>
              </h3>
              <table class="tasks">
                <tbody>
                  {rows.map((t) => (
                    <TaskRow key={t.id} t={t} progress={progress.get(t.id)} act={act} />
                  ))}
                </tbody>
              </table>
            </div>
          );
        })}
    </section>
  );
}

function isTaskEvent(e: FeedEvent): boolean {
  const p = e.payload as { entity?: unknown } | null;
  return p?.entity === 'mesh_task';
}

function TaskRow(props: {
  t: MeshTask;
  progress: Progress | undefined;
  act: (t: MeshTask, what: 'retry' | 'cancel') => Promise<void>;
}) {
  const { t, progress } = props;
  const [busy, setBusy] = useState(false);
  const run = async (what: 'retry' | 'cancel') => {
    setBusy(true);
    await props.act(t, what);
    setBusy(false);
  };
  return (
    <tr data-task={t.id}>
      <td>
        {t.title}
        {t.parent_id && <span class="muted"> (run of {t.parent_id})</span>}
      </td>
      <td class="muted">
        attempt {t.attempt}/{t.max_attempts} · prio {t.priority} · {t.claim_policy}
      </td>
      <td class="mono">{t.claimed_by ?? ''}</td>
      <td>
        {t.state === 'running' && progress && (
          <span data-testid="progress">
            {progress.percent !== undefined && (
              <progress max={100} value={progress.percent} aria-label={`progress of ${t.title}`} />
            )}{' '}
            {progress.text}
          </span>
        )}
        {t.state === 'failed' && t.failure_reason && (
          <span class="error" data-testid="failure-reason">
            {t.failure_reason}
          </span>
        )}
      </td>
      <td class="actions">
        {t.state === 'failed' && (
          <button type="button" disabled={busy} onClick={() => run('retry')} aria-label={`Retry ${t.title}`}>
            Retry
          </button>
        )}
        {CANCELLABLE.has(t.state) && (
          <button
            type="button"
            disabled={busy}
            onClick={() => run('cancel')}
            aria-label={`Cancel ${t.title}`}
          >
            Cancel
          </button>
        )}
      </td>
    </tr>
  );
}

function SubmitForm(props: { missionId: string; onDone: (t: MeshTask | null, error: string) => void }) {
  const [title, setTitle] = useState('');
  const [description, setDescription] = useState('');
  const [policy, setPolicy] = useState('first_claim');
  const [priority, setPriority] = useState('0');
  const [agent, setAgent] = useState('');
  const [busy, setBusy] = useState(false);
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
      if (policy === 'assigned') body.assigned_agent_id = agent.trim();
      const t = await api<MeshTask>(
        'POST',
        `/work/missions/${encodeURIComponent(props.missionId)}/tasks`,
        body,
      );
      setTitle('');
      setDescription('');
      props.onDone(t, '');
    } catch (err) {
      props.onDone(null, errorText(err));
    } finally {
      setBusy(false);
    }
  };
  return (
    <form class="card submit" onSubmit={submit} aria-label="Submit a task">
      <h3>Submit a task</h3>
      <div class="toolbar">
        <label>
          Title <input value={title} onInput={(e) => setTitle((e.target as HTMLInputElement).value)} />
        </label>
        <label>
          Policy{' '}
          <select value={policy} onChange={(e) => setPolicy((e.target as HTMLSelectElement).value)}>
            <option value="first_claim">first_claim</option>
            <option value="assigned">assigned</option>
            <option value="broadcast">broadcast</option>
          </select>
        </label>
        {policy === 'assigned' && (
          <label>
            Agent id <input value={agent} onInput={(e) => setAgent((e.target as HTMLInputElement).value)} />
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
      <label class="block">
        Description{' '}
        <textarea
          rows={2}
          value={description}
          onInput={(e) => setDescription((e.target as HTMLTextAreaElement).value)}
        />
      </label>
      <button type="submit" disabled={busy}>
        {busy ? 'Submitting…' : 'Submit task'}
      </button>
    </form>
  );
}
