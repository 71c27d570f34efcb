// Domains the token may see, with their missions.
import { useEffect, useState } from 'preact/hooks';
import type { Domain, Mission } from '../../../src/protocol/records.js';
import { ApiError, listAll } from '../api.js';
import { CopyButton } from '../ui.js';

export function DomainsView() {
  const [domains, setDomains] = useState<Domain[] | null>(null);
  const [missions, setMissions] = useState<Record<string, Mission[]>>({});
  const [error, setError] = useState<string | null>(null);
  useEffect(() => {
    let live = true;
    (async () => {
      try {
        const ds = await listAll<Domain>('/domains');
        if (!live) return;
        setDomains(ds);
        const ms: Record<string, Mission[]> = {};
        await Promise.all(
          ds.map(async (d) => {
            ms[d.id] = await listAll<Mission>(`/domains/${encodeURIComponent(d.id)}/m`);
          }),
        );
        if (live) setMissions(ms);
      } catch (e) {
        if (live) setError(e instanceof ApiError ? e.detail : String(e));
      }
    })();
    return () => {
      live = false;
    };
  }, []);
  if (error)
    return (
      <p role="alert" class="error">
        {error}
      </p>
    );
  if (!domains) return <p class="muted">Loading…</p>;
  return (
    <section>
      <h2>Domains</h2>
      {domains.length === 0 && <p class="muted">This token sees no domains.</p>}
      <ul class="cards" data-testid="domains">
        {domains.map((d) => (
          <li key={d.id} class="card">
            <h3>{d.name}</h3>
            <p class="muted mono">
              {d.id} <CopyButton text={d.id} label={`Copy id of domain ${d.name}`} />
            </p>
            {d.description && <p>{d.description}</p>}
            <ul class="missions">
              {(missions[d.id] ?? []).map((m) => (
                <li key={m.id}>
                  <a href={`#/tasks/${encodeURIComponent(m.id)}`} title={`mission ${m.id}`}>
                    {m.name}
                  </a>{' '}
                  <CopyButton text={m.id} label={`Copy id of mission ${m.name}`} />
                </li>
              ))}
            </ul>
          </li>
        ))}
      </ul>
    </section>
  );
}
