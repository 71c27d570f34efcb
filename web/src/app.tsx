// The console shell: sign-in with a token, navigation, and the current view (hash routes,
// so the tower serves one index.html and never needs a catch-all route).
import { useEffect, useState } from 'preact/hooks';
import type { List } from '../../src/protocol/common.js';
import type { Domain } from '../../src/protocol/records.js';
import { ApiError, api, clearToken, getToken, rateLimit, setToken } from './api.js';
import { feedStore } from './feed.js';
import { directory } from './names.js';
import { ApprovalsView } from './views/approvals.js';
import { DomainsView } from './views/domains.js';
import { FeedView } from './views/feed.js';
import { NodesView } from './views/nodes.js';
import { TaskPage } from './views/task.js';
import { TasksView } from './views/tasks.js';
import { TerminalView } from './views/terminal.js';

export interface Route {
  view: string;
  arg?: string;
}

const VIEWS: { id: string; label: string }[] = [
  { id: 'feed', label: 'Feed' },
  { id: 'tasks', label: 'Tasks' },
  { id: 'approvals', label: 'Approvals' },
  { id: 'nodes', label: 'Nodes' },
  { id: 'domains', label: 'Domains' },
];

/** Pages under a view: its tab stays marked. */
const PARENT: Record<string, string> = { task: 'tasks', attach: 'nodes' };

function parseHash(): Route {
  const [view, arg] = location.hash.replace(/^#\/?/, '').split('/');
  return { view: view || 'domains', ...(arg ? { arg: decodeURIComponent(arg) } : {}) };
}

export function App() {
  const [token, setTok] = useState<string | null>(getToken());
  const [route, setRoute] = useState<Route>(parseHash());
  useEffect(() => {
    const on = () => setRoute(parseHash());
    addEventListener('hashchange', on);
    return () => removeEventListener('hashchange', on);
  }, []);
  useEffect(() => {
    if (!token) return;
    feedStore.start(token);
    void directory.load();
    return () => feedStore.stop();
  }, [token]);
  const [, tick] = useState(0);
  useEffect(() => feedStore.subscribe(() => tick((n) => n + 1)), []);
  useEffect(() => rateLimit.subscribe(() => tick((n) => n + 1)), []);
  if (!token) return <SignIn onSignedIn={(t) => setTok(t)} />;
  const signOut = () => {
    feedStore.stop();
    directory.clear();
    clearToken();
    setTok(null);
  };
  return (
    <div class="shell">
      <header>
        <span class="brand">svc</span>
        <nav aria-label="views">
          {VIEWS.map((v) => (
            <a
              key={v.id}
              href={`#/${v.id}`}
              aria-current={route.view === v.id || PARENT[route.view] === v.id ? 'page' : undefined}
            >
              {v.label}
            </a>
          ))}
        </nav>
        <RateLimitBadge />
        <button type="button" class="signout" onClick={signOut}>
          Sign out
        </button>
      </header>
      {feedStore.state === 'down' && (
        <div class="banner" role="status" data-testid="feed-banner">
          Feed disconnected
          {feedStore.downSince !== null && ` since ${new Date(feedStore.downSince).toLocaleTimeString()}`} —
          reconnecting, and resuming from the last event seen ({feedStore.detail})
        </div>
      )}
      <main>
        {route.view === 'domains' ? (
          <DomainsView />
        ) : route.view === 'feed' ? (
          <FeedView />
        ) : route.view === 'tasks' ? (
          <TasksView mission={route.arg} />
        ) : route.view === 'task' && route.arg ? (
          <TaskPage id={route.arg} />
        ) : route.view === 'approvals' ? (
          <ApprovalsView />
        ) : route.view === 'attach' && route.arg ? (
          <TerminalView key={route.arg} agent={route.arg} />
        ) : route.view === 'nodes' ? (
          <NodesView />
        ) : (
          <p>Unknown view “{route.view}”.</p>
        )}
      </main>
    </div>
  );
}

/** The token's rate-limit block; a warning once it is used up. */
function RateLimitBadge() {
  const rl = rateLimit.current;
  if (!rl) return null;
  const reset = new Date(rl.reset_at).toLocaleTimeString();
  if (rl.remaining <= 0)
    return (
      <span class="error" data-testid="rate-limit" title="requests are refused until the reset">
        rate limited until {reset}
      </span>
    );
  return (
    <span class="muted" data-testid="rate-limit" title={`resets ${reset}`}>
      rate limit {rl.remaining}/{rl.limit}
    </span>
  );
}

function SignIn(props: { onSignedIn: (token: string) => void }) {
  const [value, setValue] = useState('');
  const [error, setError] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);
  const submit = async (e: Event) => {
    e.preventDefault();
    const t = value.trim();
    if (!t) {
      setError('Paste a token (svc token create, or the admin token of first start).');
      return;
    }
    setBusy(true);
    setError(null);
    try {
      // Any authenticated read proves the token; domains is one every console user needs.
      await api<List<Domain>>('GET', '/domains?limit=1', undefined, t);
      setToken(t);
      props.onSignedIn(t);
    } catch (err) {
      setError(err instanceof ApiError ? err.detail : String(err));
    } finally {
      setBusy(false);
    }
  };
  return (
    <main class="signin">
      <form onSubmit={submit}>
        <h1>svc console</h1>
        <label for="token">Token</label>
        <input
          id="token"
          name="token"
          type="password"
          autocomplete="off"
          value={value}
          onInput={(e) => setValue((e.target as HTMLInputElement).value)}
        />
        <button type="submit" disabled={busy}>
          {busy ? 'Signing in…' : 'Sign in'}
        </button>
        {error && (
          <p role="alert" class="error">
            {error}
          </p>
        )}
        <p class="hint">The token is kept in this tab's session storage only.</p>
      </form>
    </main>
  );
}
