// Live feed: events as they arrive, filters, pause, a banner while the stream is down and
// the principal's rate-limit block from the latest event.
import { useEffect, useState } from 'preact/hooks';
import type { FeedEvent } from '../../../src/protocol/events.js';
import { feedStore } from '../feed.js';

const TYPES = ['approval', 'inbox', 'matrix', 'progress'];

export function FeedView() {
  const [, tick] = useState(0);
  const [type, setType] = useState('');
  const [domain, setDomain] = useState('');
  const [mission, setMission] = useState('');
  // Paused: the view keeps showing the events as of the moment of pausing.
  const [frozen, setFrozen] = useState<FeedEvent[] | null>(null);
  useEffect(() => feedStore.subscribe(() => tick((n) => n + 1)), []);
  const paused = frozen !== null;
  const events = frozen ?? feedStore.events;
  const state = { s: feedStore.state, detail: feedStore.detail };
  const heldCount = paused ? Math.max(0, countNewer(feedStore.events, frozen)) : 0;
  const resume = () => setFrozen(null);
  const setPaused = (_: boolean) => setFrozen(feedStore.events);
  const shown = events.filter(
    (e) =>
      (!type || e.type === type) &&
      (!domain.trim() || e.domain_id === domain.trim()) &&
      (!mission.trim() || e.mission_id === mission.trim()),
  );

  const reset = feedStore.reset;
  return (
    <section>
      <h2>
        Live feed{' '}
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
          <input
            value={domain}
            placeholder="domain id"
            onChange={(e) => setDomain((e.target as HTMLInputElement).value)}
          />
        </label>
        <label>
          Mission{' '}
          <input
            value={mission}
            placeholder="mission id"
            onChange={(e) => setMission((e.target as HTMLInputElement).value)}
          />
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
      {shown.length === 0 && <p class="muted">No events yet.</p>}
      <table data-testid="feed">
        <tbody>
          {shown.map((e) => (
            <tr key={e.id}>
              <td class="mono">{e.id}</td>
              <td class="mono">{new Date(e.ts).toLocaleTimeString()}</td>
              <td>{e.type}</td>
              <td>{e.status}</td>
              <td class="mono">{summary(e)}</td>
            </tr>
          ))}
        </tbody>
      </table>
    </section>
  );
}

function summary(e: FeedEvent): string {
  const p = e.payload as Record<string, unknown> | null;
  if (p && typeof p === 'object') {
    const title = p.title ?? p.kind ?? p.message ?? p.name;
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
