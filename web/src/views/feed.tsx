// The feed: the recent history at once (older pages on demand), then events as they arrive;
// filters among known domains and missions, pause, a banner while the stream is down and the
// principal's rate-limit block from the latest event.
import { useEffect, useState } from 'preact/hooks';
import type { FeedEvent } from '../../../src/protocol/events.js';
import { feedStore } from '../feed.js';
import { directory } from '../names.js';
import { Ref, Time, useDirectory, useNow } from '../ui.js';

const TYPES = ['approval', 'inbox', 'matrix', 'progress'];

export function FeedView() {
  const [, tick] = useState(0);
  const [type, setType] = useState('');
  const [domain, setDomain] = useState('');
  const [mission, setMission] = useState('');
  // Paused: the view keeps showing the events as of the moment of pausing.
  const [frozen, setFrozen] = useState<FeedEvent[] | null>(null);
  useEffect(() => feedStore.subscribe(() => tick((n) => n + 1)), []);
  useDirectory();
  const now = useNow();
  const paused = frozen !== null;
  const events = frozen ?? feedStore.events;
  const state = { s: feedStore.state, detail: feedStore.detail };
  const heldCount = paused ? Math.max(0, countNewer(feedStore.events, frozen)) : 0;
  const resume = () => setFrozen(null);
  const setPaused = (_: boolean) => setFrozen(feedStore.events);
  const shown = events.filter(
    (e) =>
      (!type || e.type === type) &&
      (!domain || e.domain_id === domain) &&
      (!mission || e.mission_id === mission),
  );

  const reset = feedStore.reset;
  return (
    <section>
      <h2>
        Feed{' '}
        <span class={state.s === 'live' ? 'ok' : 'muted'} data-testid="feed-state">
          {state.s}
        </span>
      </h2>
      <div class="toolbar">
        <label>
          Type{' '}
          <select value={type} onChange={(e) => setType((e.target as HTMLSelectElement).value)}>
            <option value="">all</option>
            {TYPES.map((t) => (
              <option key={t} value={t}>
                {t}
              </option>
            ))}
          </select>
        </label>
        <label>
          Domain{' '}
          <select
            value={domain}
            onChange={(e) => {
              setDomain((e.target as HTMLSelectElement).value);
              setMission('');
            }}
          >
            <option value="">all</option>
            {directory.domains.map((d) => (
              <option key={d.id} value={d.id}>
                {d.name}
              </option>
            ))}
          </select>
        </label>
        <label>
          Mission{' '}
          <select value={mission} onChange={(e) => setMission((e.target as HTMLSelectElement).value)}>
            <option value="">all</option>
            {directory.missions
              .filter((m) => !domain || m.domain_id === domain)
              .map((m) => (
                <option key={m.id} value={m.id}>
                  {domain ? m.name : `${directory.name('domain', m.domain_id) ?? m.domain_id} / ${m.name}`}
                </option>
              ))}
          </select>
        </label>
        {paused ? (
          <button type="button" onClick={resume}>
            Resume ({heldCount} new)
          </button>
        ) : (
          <button type="button" onClick={() => setPaused(true)}>
            Pause
          </button>
        )}
      </div>
      {reset && (
        <p role="status" class="warn" data-testid="feed-reset">
          Some events are gone ({reset.reason}): the tower no longer keeps events after{' '}
          <span class="mono">{reset.last_event_id}</span> up to <span class="mono">{reset.resume_after}</span>
          ; the feed continues from there.
        </p>
      )}
      {feedStore.historyError && (
        <p role="alert" class="error">
          Cannot read the history: {feedStore.historyError}
        </p>
      )}
      {shown.length === 0 && !feedStore.loadingHistory && (
        <p class="muted">{events.length === 0 ? 'No events yet.' : 'No events match these filters.'}</p>
      )}
      <table data-testid="feed" class="feed">
        <thead>
          <tr>
            <th>when</th>
            <th>type</th>
            <th>status</th>
            <th>what</th>
            <th>domain / mission</th>
            <th>agent</th>
          </tr>
        </thead>
        <tbody>
          {shown.map((e) => (
            <tr key={e.id} data-event={e.id}>
              <td class="nowrap">
                <Time iso={e.ts} now={now} />
              </td>
              <td>{e.type}</td>
              <td>{e.status}</td>
              <td>
                <Summary e={e} />
              </td>
              <td>
                {e.domain_id && <Ref kind="domain" id={e.domain_id} copy={false} />}
                {e.mission_id && (
                  <>
                    {' / '}
                    <Ref kind="mission" id={e.mission_id} copy={false} />
                  </>
                )}
              </td>
              <td>{e.agent_id && <Ref kind="agent" id={e.agent_id} copy={false} />}</td>
            </tr>
          ))}
        </tbody>
      </table>
      <p class="toolbar">
        {feedStore.loadingHistory ? (
          <span class="muted">Loading history…</span>
        ) : feedStore.older ? (
          <button type="button" onClick={() => void feedStore.loadOlder()}>
            Load older events
          </button>
        ) : (
          <span class="muted" data-testid="feed-start">
            {events.length > 0 ? 'That is the oldest event the tower keeps.' : ''}
          </span>
        )}
      </p>
    </section>
  );
}

/** What happened, in words: a task's title links to its page. */
function Summary(props: { e: FeedEvent }) {
  const { e } = props;
  const p = e.payload as Record<string, unknown>;
  const taskId = p.entity === 'mesh_task' ? p.id : p.task_id;
  const text = summary(e);
  const action =
    typeof p.action === 'string' && p.entity ? `${String(p.entity).replace('_', ' ')} ${p.action}: ` : '';
  if (typeof taskId === 'string')
    return (
      <>
        {action}
        <a href={`#/task/${encodeURIComponent(taskId)}`}>{text}</a>
      </>
    );
  return (
    <>
      {action}
      {text}
    </>
  );
}

function summary(e: FeedEvent): string {
  const p = e.payload as Record<string, unknown> | null;
  if (p && typeof p === 'object') {
    const title = p.title ?? p.text ?? p.message ?? p.name ?? p.kind;
    if (typeof title === 'string') return title;
  }
  return JSON.stringify(e.payload).slice(0, 160);
}

function countNewer(all: FeedEvent[], frozen: FeedEvent[]): number {
  const top = frozen[0]?.id;
  if (top === undefined) return all.length;
  const i = all.findIndex((e) => e.id === top);
  return i < 0 ? all.length : i;
}
