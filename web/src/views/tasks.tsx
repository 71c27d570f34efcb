// Mesh tasks of one mission, grouped by state, with filters among known names (mission, state,
// agent): each links to its page (task.tsx); retry (failed only) and cancel (pending, claimed,
// running) in the row; running tasks show their live progress from the feed's `progress`
// events; a dialog submits a new task. The list reloads when a `matrix` event of the mission
// arrives.
import { useCallback, useEffect, useMemo, useRef, useState } from 'preact/hooks';
import type { FeedEvent } from '../../../src/protocol/events.js';
import type { MeshTask } from '../../../src/protocol/mesh.js';
import { api, errorText, listAll } from '../api.js';
import { feedStore } from '../feed.js';
import { duration } from '../format.js';
import { directory } from '../names.js';
import { Outcome, Ref, Time, useDirectory, useNow } from '../ui.js';
import { SubmitDialog } from './task-submit.js';

export const STATES: MeshTask['state'][] = [
  'running',
  'claimed',
  'pending',
  'failed',
  'completed',
  'cancelled',
];
export const CANCELLABLE = new Set(['pending', 'claimed', 'running']);
export const ENDED = new Set(['failed', 'completed', 'cancelled']);

export interface Progress {
  text: string;
  percent?: number;
  ts: string;
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
      ts: e.ts,
      ...(typeof p.percent === 'number' ? { percent: p.percent } : {}),
    });
  }
  return out;
}

export function isTaskEvent(e: FeedEvent): boolean {
  const p = e.payload as { entity?: unknown } | null;
  return p?.entity === 'mesh_task';
}

export function ProgressBar(props: { p: Progress; title: string }) {
  const { p } = props;
  return (
    <span data-testid="progress" class="progress">
      {p.percent !== undefined && (
        <progress max={100} value={p.percent} aria-label={`progress of ${props.title}`} />
      )}{' '}
      {p.percent !== undefined && <span>{Math.round(p.percent)}%</span>} {p.text}
    </span>
  );
}

export function TasksView(props: { mission?: string | undefined }) {
  useDirectory();
  const now = useNow();
  const [error, setError] = useState<string | null>(null);
  const [notice, setNotice] = useState<string | null>(null);
  const [tasks, setTasks] = useState<MeshTask[] | null>(null);
  const [state, setState] = useState('');
  const [agent, setAgent] = useState('');
  const [submitting, setSubmitting] = useState(false);
  const [, tick] = useState(0);
  useEffect(() => feedStore.subscribe(() => tick((n) => n + 1)), []);
  const missions = directory.missions;
  const missionId = props.mission ?? missions[0]?.id;
  const mission = missions.find((m) => m.id === missionId);
  // A mission made after sign-in: asking for its name reloads the directory.
  if (missionId && !mission) directory.name('mission', missionId);

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

  if (!directory.loaded) return <p class="muted">Loading…</p>;
  const agents = [...new Set((tasks ?? []).map((t) => t.claimed_by ?? t.assigned_agent_id).filter(Boolean))];
  const shown = (tasks ?? []).filter(
    (t) =>
      (!state || t.state === state) && (!agent || t.claimed_by === agent || t.assigned_agent_id === agent),
  );
  return (
    <section>
      <div class="title-row">
        <h2>Tasks</h2>
        {mission && (
          <button type="button" class="primary" onClick={() => setSubmitting(true)}>
            New task
          </button>
        )}
      </div>
      <Outcome error={error} notice={notice} />
      {missions.length === 0 && <p class="muted">No missions: create one first.</p>}
      {missions.length > 0 && (
        <div class="toolbar">
          <label>
            Mission{' '}
            <select
              value={missionId}
              onChange={(e) => {
                location.hash = `#/tasks/${encodeURIComponent((e.target as HTMLSelectElement).value)}`;
              }}
            >
              {missions.map((m) => (
                <option key={m.id} value={m.id} title={m.id}>
                  {directory.name('domain', m.domain_id) ?? m.domain_id} / {m.name}
                </option>
              ))}
            </select>
          </label>
          <label>
            State{' '}
            <select value={state} onChange={(e) => setState((e.target as HTMLSelectElement).value)}>
              <option value="">all</option>
              {STATES.map((s) => (
                <option key={s} value={s}>
                  {s}
                </option>
              ))}
            </select>
          </label>
          <label>
            Agent{' '}
            <select value={agent} onChange={(e) => setAgent((e.target as HTMLSelectElement).value)}>
              <option value="">any</option>
              {agents.map((id) => (
                <option key={id} value={id as string} title={id as string}>
                  {directory.name('agent', id as string) ?? id}
                </option>
              ))}
            </select>
          </label>
        </div>
      )}
      {submitting && mission && (
        <SubmitDialog
          mission={mission}
          onClose={() => setSubmitting(false)}
          onDone={(t, err) => {
            if (t) {
              setNotice(`Submitted “${t.title}”.`);
              setError(null);
              void load();
            } else setNotice(null);
            if (err) setError(null);
          }}
        />
      )}
      {tasks && tasks.length === 0 && <p class="muted">No tasks in this mission yet.</p>}
      {tasks &&
        STATES.map((s) => {
          const rows = shown.filter((t) => t.state === s);
          if (rows.length === 0) return null;
          return (
            <div key={s} data-testid={`tasks-${s}`}>
              <h3>
                {s} <span class="muted">({rows.length})</span>
              </h3>
              <table class="tasks">
                <tbody>
                  {rows.map((t) => (
                    <TaskRow key={t.id} t={t} now={now} progress={progress.get(t.id)} act={act} />
                  ))}
                </tbody>
              </table>
            </div>
          );
        })}
    </section>
  );
}

function TaskRow(props: {
  t: MeshTask;
  now: number;
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
  const ended = ENDED.has(t.state);
  return (
    <tr data-task={t.id}>
      <td>
        <a href={`#/task/${encodeURIComponent(t.id)}`}>{t.title}</a>
        {t.parent_id && <span class="muted"> (a run of a broadcast)</span>}
      </td>
      <td class="muted">
        attempt {t.attempt}/{t.max_attempts} · prio {t.priority} · {t.claim_policy.replace('_', ' ')}
      </td>
      <td>{t.claimed_by ? <Ref kind="agent" id={t.claimed_by} copy={false} /> : ''}</td>
      <td class="muted nowrap">
        {ended ? (
          <span title="from submission to its end">
            took {duration(Date.parse(t.updated_at) - Date.parse(t.created_at))}
          </span>
        ) : (
          <>
            submitted <Time iso={t.created_at} now={props.now} />
          </>
        )}
      </td>
      <td>
        {t.state === 'running' && progress && <ProgressBar p={progress} title={t.title} />}
        {t.state === 'failed' && t.failure_reason && (
          <span class="error" data-testid="failure-reason" title={t.failure_reason}>
            {t.failure_reason.split('\n')[0]}
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
