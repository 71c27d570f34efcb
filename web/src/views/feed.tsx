// Live feed: events as they arrive, filters, pause, a banner while the stream is down and
// the principal's rate-limit block from the latest event.
import { useEffect, useRef, useState } from 'preact/hooks';
import { getToken } from '../api.js';
import { type FeedEvent, type FeedState, openFeed } from '../feed.js';

const TYPES = ['approval', 'inbox', 'matrix', 'progress'];
const MAX = 500;

export function FeedView() {
  const [events, setEvents] = useState<FeedEvent[]>([]);
  const [state, setState] = useState<{ s: FeedState; detail?: string }>({ s: 'connecting' });
  const [type, setType] = useState('');
  const [domain, setDomain] = useState('');
  const [mission, setMission] = useState('');
  const [paused, setPaused] = useState(false);
  const held = useRef<FeedEvent[]>([]);
  const pausedRef = useRef(paused);
  pausedRef.current = paused;

  // One resumable stream of everything the token may see; filters apply to what is shown, so
  // changing them never loses events already received.
  useEffect(() => {
    const token = getToken();
    if (!token) return;
    return openFeed(token, new URLSearchParams(), {
      onEvent: (ev) => {
        if (pausedRef.current) held.current.push(ev);
        else setEvents((old) => [ev, ...old].slice(0, MAX));
      },
      onState: (s, detail) => setState({ s, ...(detail ? { detail } : {}) }),
      onReset: () => setEvents([]),
    });
  }, []);
  const shown = events.filter(
    (e) =>
      (!type || e.type === type) &&
      (!domain.trim() || e.domain_id === domain.trim()) &&
      (!mission.trim() || e.mission_id === mission.trim()),
  );

  const resume = () => {
    const h = held.current.reverse();
    held.current = [];
    setEvents((old) => [...h, ...old].slice(0, MAX));
    setPaused(false);
  };
  const rl = events.find((e) => e.rate_limit)?.rate_limit;
  return (
    <section>
      {state.s === 'down' && (
        <div class="banner" role="status" data-testid="feed-banner">
          Feed disconnected — reconnecting… ({state.detail})
        </div>
      )}
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
            Resume ({held.current.length} held)
          </button>
        ) : (
          <button type="button" onClick={() => setPaused(true)}>
            Pause
          </button>
        )}
        {rl && (
          <span class="muted" data-testid="rate-limit">
            rate limit {rl.remaining}/{rl.limit}, resets {new Date(rl.reset_at).toLocaleTimeString()}
          </span>
        )}
      </div>
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
