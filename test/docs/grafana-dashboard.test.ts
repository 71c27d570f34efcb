// docs/grafana-dashboard.json is built on metrics that exist: every PromQL expression of every
// panel names only metrics the tower's and svcd's registries register (a histogram also by its
// _bucket, _sum and _count series), and every metric an operator alerts on has a panel.
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { createDaemonMetrics } from '../../src/daemon/metrics.js';
import { systemClock } from '../../src/lib/clock.js';
import { FeedStats } from '../../src/tower/feed/stats.js';
import { createMetrics } from '../../src/tower/http/metrics.js';
import type { Db } from '../../src/tower/store/types.js';

interface Panel {
  type: string;
  title: string;
  targets?: { expr: string }[];
}

const dashboard = JSON.parse(
  readFileSync(resolve(import.meta.dirname, '../../docs/grafana-dashboard.json'), 'utf8'),
) as { panels: Panel[] };

/** Every series name a scrape of a tower or a svcd can carry. */
function registeredSeries(): Set<string> {
  // The store is never read: only the names registered are wanted.
  const tower = createMetrics({ store: { db: {} as Db, clock: systemClock }, nodesOnline: () => 0 });
  new FeedStats().register(tower.registry);
  const metrics = [
    ...tower.registry.getMetricsAsArray(),
    ...(tower.store?.registry.getMetricsAsArray() ?? []),
    ...createDaemonMetrics().registry.getMetricsAsArray(),
  ];
  const names = new Set<string>();
  for (const m of metrics) {
    const { name, type } = m as unknown as { name: string; type: string };
    names.add(name);
    if (type === 'histogram') for (const s of ['_bucket', '_sum', '_count']) names.add(name + s);
  }
  return names;
}

/** Metric names in a PromQL expression: ours all start svc_ or svcd_ (no label or function does). */
function metricNames(expr: string): string[] {
  const unquoted = expr.replace(/"(?:[^"\\]|\\.)*"/g, '""');
  return [...unquoted.matchAll(/\b(svcd?_[a-z0-9_]+)\b/g)].map((m) => m[1] as string);
}

describe('docs/grafana-dashboard.json', () => {
  const series = registeredSeries();
  const queries = dashboard.panels.flatMap((p) =>
    (p.targets ?? []).map((t) => ({ panel: p.title, expr: t.expr })),
  );

  it('has queries, each naming at least one metric, every one registered', () => {
    expect(queries.length).toBeGreaterThan(15);
    const unknown = queries.flatMap((q) =>
      metricNames(q.expr)
        .filter((n) => !series.has(n))
        .map((n) => `${q.panel}: ${n}`),
    );
    expect(unknown).toEqual([]);
    expect(queries.filter((q) => metricNames(q.expr).length === 0)).toEqual([]);
  });

  it('has a panel for every metric an operator alerts on', () => {
    const used = new Set(queries.flatMap((q) => metricNames(q.expr)));
    const wanted = [
      'svc_http_request_duration_seconds_count',
      'svc_http_request_duration_seconds_bucket',
      'svc_mesh_tasks',
      'svc_mesh_claim_duration_seconds_bucket',
      'svc_mesh_lease_expiries_total',
      'svc_nodes_online',
      'svc_agents',
      'svc_approvals_pending',
      'svcd_cron_fire_delay_seconds_bucket',
      'svcd_agent_restarts_total',
    ];
    expect(wanted.filter((n) => !used.has(n))).toEqual([]);
  });
});
