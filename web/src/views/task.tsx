// One mesh task (#/task/<id>): its state, live progress while it runs, the approvals its agent
// asked (decided here too), the failure's output tail as it was printed, the work it kept
// (branch, diffstat, diff), the result, and the timeline of its events (created, claimed,
// started, progress, approvals asked and decided, ended) from the feed's history and then
// live. The page is a list of sections (TASK_SECTIONS): more can be added without touching
// the others.
import type { ComponentChildren } from 'preact';
import { useCallback, useEffect, useMemo, useState } from 'preact/hooks';
import type { FeedEvent, HistoryPage } from '../../../src/protocol/events.js';
import type { MeshTask } from '../../../src/protocol/mesh.js';
import { api, errorText } from '../api.js';
import { feedStore } from '../feed.js';
import { duration, fullTime } from '../format.js';
import { Card, CopyButton, Ref, Time, useNow } from '../ui.js';
import { ApprovalsSection } from './task-approvals.js';
import { ChangesSection } from './task-changes.js';
import { CANCELLABLE, ENDED, latestProgress, ProgressBar } from './tasks.js';

/** What each section of the task page gets. */
export interface TaskSectionProps {
  task: MeshTask;
  /** The task's events, newest first (history, then live). */
  events: FeedEvent[];
  now: number;
  reload: () => Promise<void>;
}

/** How many history pages the timeline reads at most (200 events each). */
const MAX_PAGES = 10;

function about(e: FeedEvent, id: string): boolean {
  const p = e.payload;
  return (p.entity === 'mesh_task' && p.id === id) || p.task_id === id;
}

export function TaskPage(props: { id: string }) {
  const now = useNow(5000);
  const [task, setTask] = useState<MeshTask | null>(null);
  const [history, setHistory] = useState<FeedEvent[]>([]);
  const [error, setError] = useState<string | null>(null);
  const [, tick] = useState(0);
  useEffect(() => feedStore.subscribe(() => tick((n) => n + 1)), []);

  const reload = useCallback(async () => {
    try {
      setTask(await api<MeshTask>('GET', `/work/tasks/${encodeURIComponent(props.id)}`));
      setError(null);
    } catch (e) {
      setError(errorText(e));
    }
  }, [props.id]);
  useEffect(() => {
    setTask(null);
    setHistory([]);
    void reload();
  }, [reload]);

  // The timeline's history, once the task (and so its mission) is known.
  const missionId = task?.mission_id;
  useEffect(() => {
    if (!missionId) return;
    let live = true;
    (async () => {
      const out: FeedEvent[] = [];
      let before: string | null = null;
      try {
        for (let i = 0; i < MAX_PAGES; i++) {
          const q = new URLSearchParams({ task_id: props.id, mission_id: missionId, limit: '200' });
          if (before) q.set('before', before);
          const page: HistoryPage = await api<HistoryPage>('GET', `/events?${q}`);
          out.push(...page.items);
          before = page.next_cursor;
          if (!before || out.some((e) => e.payload.action === 'created')) break;
        }
        if (live) setHistory(out);
      } catch (e) {
        if (live) setError(errorText(e));
      }
    })();
    return () => {
      live = false;
    };
  }, [props.id, missionId]);

  // Live events of this task, merged with the history (by id, newest first).
  const liveEvents = feedStore.events.filter((e) => about(e, props.id));
  const events = useMemo(() => {
    const byId = new Map<string, FeedEvent>();
    for (const e of [...liveEvents, ...history]) byId.set(e.id, e);
    return [...byId.values()].sort((a, b) => (BigInt(b.id) > BigInt(a.id) ? 1 : -1));
  }, [liveEvents.length, liveEvents[0]?.id, history]);

  // A state change of the task arrived: read it again.
  const newestMatrix = liveEvents.find((e) => e.type === 'matrix')?.id;
  useEffect(() => {
    if (newestMatrix) void reload();
  }, [newestMatrix, reload]);

  if (error && !task)
    return (
      <section>
        <p>
          <a href="#/tasks">← Tasks</a>
        </p>
        <p role="alert" class="error">
          {error}
        </p>
      </section>
    );
  if (!task) return <p class="muted">Loading…</p>;
  const section: TaskSectionProps = { task, events, now, reload };
  return (
    <section class="task-page" aria-label={`task ${task.title}`}>
      <p>
        <a href={`#/tasks/${encodeURIComponent(task.mission_id)}`}>
          ← Tasks of <Ref kind="mission" id={task.mission_id} copy={false} />
        </a>
      </p>
      {error && (
        <p role="alert" class="error">
          {error}
        </p>
      )}
      {TASK_SECTIONS.map((S, i) => (
        <S key={i} {...section} />
      ))}
    </section>
  );
}

function Header(p: TaskSectionProps) {
  const { task: t } = p;
  const [busy, setBusy] = useState(false);
  const [notice, setNotice] = useState<string | null>(null);
  const [err, setErr] = useState<string | null>(null);
  const act = async (what: 'retry' | 'cancel') => {
    setBusy(true);
    setErr(null);
    try {
      const after = await api<MeshTask>('POST', `/work/tasks/${encodeURIComponent(t.id)}/${what}`, {});
      setNotice(`${what === 'retry' ? 'Retried' : 'Cancelled'}: now ${after.state}.`);
    } catch (e) {
      setErr(errorText(e));
    }
    setBusy(false);
    await p.reload();
  };
  return (
    <div class="task-head">
      <h2>
        {t.title}{' '}
        <span class={`state state-${t.state}`} data-testid="task-state">
          {t.state}
        </span>
      </h2>
      <dl class="facts">
        <dt>id</dt>
        <dd class="mono">
          {t.id} <CopyButton text={t.id} label="Copy task id" />
        </dd>
        <dt>domain / mission</dt>
        <dd>
          <Ref kind="domain" id={t.domain_id} /> / <Ref kind="mission" id={t.mission_id} />
        </dd>
        <dt>claimed by</dt>
        <dd>{t.claimed_by ? <Ref kind="agent" id={t.claimed_by} /> : <span class="muted">nobody</span>}</dd>
        <dt>attempt</dt>
        <dd>
          {t.attempt} of {t.max_attempts} · priority {t.priority} · {t.claim_policy.replace('_', ' ')} · lease{' '}
          {t.lease_seconds} s
        </dd>
        <dt>submitted</dt>
        <dd>
          <Time iso={t.created_at} now={p.now} />
        </dd>
        <dt>{ENDED.has(t.state) ? 'ended' : 'last change'}</dt>
        <dd>
          <Time iso={t.updated_at} now={p.now} />
          {ENDED.has(t.state) && (
            <span class="muted">
              {' '}
              · {duration(Date.parse(t.updated_at) - Date.parse(t.created_at))} after submission
            </span>
          )}
        </dd>
      </dl>
      <div class="toolbar">
        {t.state === 'failed' && (
          <button type="button" disabled={busy} onClick={() => act('retry')}>
            Retry
          </button>
        )}
        {CANCELLABLE.has(t.state) && (
          <button type="button" disabled={busy} onClick={() => act('cancel')}>
            Cancel
          </button>
        )}
        {notice && (
          <span role="status" class="ok">
            {notice}
          </span>
        )}
        {err && (
          <span role="alert" class="error">
            {err}
          </span>
        )}
      </div>
      {t.description && <p class="description">{t.description}</p>}
    </div>
  );
}

function ProgressSection(p: TaskSectionProps) {
  if (p.task.state !== 'running' && p.task.state !== 'claimed') return null;
  const latest = latestProgress(p.events).get(p.task.id);
  return (
    <Card title="Progress" testid="task-progress">
      {latest ? (
        <p>
          <ProgressBar p={latest} title={p.task.title} />{' '}
          <span class="muted">
            · <Time iso={latest.ts} now={p.now} />
          </span>
        </p>
      ) : (
        <p class="muted">No progress reported yet.</p>
      )}
    </Card>
  );
}

/** The reason, then the output tail as the agent printed it (subagent.ts joins them). */
function FailureSection(p: TaskSectionProps) {
  const reason = p.task.failure_reason;
  if (!reason) return null;
  const [head, tail] = splitTail(reason);
  return (
    <Card title={p.task.state === 'failed' ? 'Failure' : 'Last failure'} testid="task-failure">
      <p class="error">{head}</p>
      {tail !== null && (
        <>
          <h4>Output tail</h4>
          <pre class="output" data-testid="output-tail">
            {tail}
          </pre>
        </>
      )}
    </Card>
  );
}

export function splitTail(reason: string): [string, string | null] {
  const mark = '\n--- output tail ---\n';
  const i = reason.indexOf(mark);
  if (i >= 0) return [reason.slice(0, i), reason.slice(i + mark.length)];
  const nl = reason.indexOf('\n');
  return nl < 0 ? [reason, null] : [reason.slice(0, nl), reason.slice(nl + 1)];
}

function ResultSection(p: TaskSectionProps) {
  const r = p.task.result;
  if (r === null || r === undefined) return null;
  return (
    <Card title="Result" testid="task-result">
      <pre class="output">{typeof r === 'string' ? r : JSON.stringify(r, null, 2)}</pre>
    </Card>
  );
}

const ENDS = new Set(['completed', 'failed', 'cancelled', 'expired', 'lease_expired', 'retried']);

function TimelineSection(p: TaskSectionProps) {
  const rows = [...p.events].reverse(); // oldest first
  // A run: from a claim to the next end of that attempt.
  const runTime = new Map<string, number>();
  let claimedAt: number | null = null;
  for (const e of rows) {
    const action = String(e.payload.action ?? '');
    if (action === 'claimed') claimedAt = Date.parse(e.ts);
    else if (claimedAt !== null && ENDS.has(action)) {
      runTime.set(e.id, Date.parse(e.ts) - claimedAt);
      claimedAt = null;
    }
  }
  return (
    <Card title="Timeline" testid="task-timeline">
      {rows.length === 0 && <p class="muted">No events of this task are kept.</p>}
      <ol class="timeline">
        {rows.map((e) => {
          const pl = e.payload;
          const progress = e.type === 'progress';
          const approval = e.type === 'approval';
          const run = runTime.get(e.id);
          const action = progress
            ? 'progress'
            : approval
              ? `approval_${String(pl.action)}`
              : String(pl.action);
          return (
            <li key={e.id} data-action={action}>
              <time dateTime={e.ts} title={fullTime(e.ts)}>
                {new Date(e.ts).toLocaleTimeString()}
              </time>{' '}
              <strong>
                {progress
                  ? 'progress'
                  : approval
                    ? `approval ${pl.action === 'requested' ? 'asked' : String(pl.action)}`
                    : String(pl.action)}
              </strong>{' '}
              {progress ? (
                <span>
                  {typeof pl.percent === 'number' && `${Math.round(pl.percent)}% `}
                  {String(pl.text ?? '')}
                </span>
              ) : approval ? (
                <ApprovalLine pl={pl} />
              ) : (
                <span class="muted">
                  {e.status}
                  {typeof pl.attempt === 'number' && ` · attempt ${pl.attempt}`}
                </span>
              )}
              {e.agent_id && (
                <>
                  {' · '}
                  <Ref kind="agent" id={e.agent_id} copy={false} />
                </>
              )}
              {run !== undefined && <span class="muted"> · ran {duration(run)}</span>}
            </li>
          );
        })}
      </ol>
    </Card>
  );
}

/** An approval event of the timeline: the tool call, and who decided with the reason. */
function ApprovalLine(props: { pl: FeedEvent['payload'] }) {
  const { pl } = props;
  const call = pl.tool_call as { kind?: unknown; title?: unknown } | undefined;
  return (
    <span>
      {call ? `${String(call.kind)}: ${String(call.title)}` : String(pl.title ?? '')}
      <span class="muted">
        {typeof pl.decided_by === 'string' && ` · by ${pl.decided_by}`}
        {typeof pl.reason === 'string' && ` · ${pl.reason}`}
      </span>
    </span>
  );
}

/** The sections of the task page, in order. */
export const TASK_SECTIONS: ((p: TaskSectionProps) => ComponentChildren)[] = [
  Header,
  ProgressSection,
  ApprovalsSection,
  FailureSection,
  ChangesSection,
  ResultSection,
  TimelineSection,
];
