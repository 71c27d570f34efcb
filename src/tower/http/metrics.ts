// Prometheus metrics for one tower (docs/operations.md#metrics): request latencies (and so
// counts) by route pattern, never by raw URL, which would explode cardinality; Node's process
// metrics; the mesh's counters (metrics/mesh.ts); nodes connected to this replica; and the
// gauges read from the store at scrape time (metrics/store-gauges.ts).
import type { FastifyInstance } from 'fastify';
import { collectDefaultMetrics, Gauge, Histogram, Registry } from 'prom-client';
import type { Clock } from '../../lib/clock.js';
import { type MeshMetricHooks, meshMetrics } from '../metrics/mesh.js';
import { StoreGauges } from '../metrics/store-gauges.js';
import type { Db } from '../store/types.js';

export interface TowerMetrics {
  registry: Registry;
  /** Its _count series is the request count by method, route and code. */
  latency: Histogram<'method' | 'route' | 'code'>;
  /** Hooks the mesh calls as it claims, sweeps and finishes tasks. */
  mesh: MeshMetricHooks;
  /** Read at each scrape; absent in route tests that build an app alone. */
  store: StoreGauges | null;
}

export interface MetricsOptions {
  /** The store the scrape-time gauges read. */
  store?: { db: Db; clock: Clock; timeoutMs?: number };
  /** Node control channels connected to this replica. */
  nodesOnline?: () => number;
}

export function createMetrics(opts: MetricsOptions = {}): TowerMetrics {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry, prefix: 'svc_tower_' });
  const nodesOnline = opts.nodesOnline;
  if (nodesOnline) {
    new Gauge({
      name: 'svc_nodes_online',
      help: 'Nodes whose control channel is connected to this replica (sum over replicas for the fleet)',
      registers: [registry],
      collect() {
        this.set(nodesOnline());
      },
    });
  }
  return {
    registry,
    latency: new Histogram({
      name: 'svc_http_request_duration_seconds',
      help: 'HTTP request latency by method, route pattern and status code (the _count series counts requests)',
      labelNames: ['method', 'route', 'code'],
      buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5],
      registers: [registry],
    }),
    mesh: meshMetrics(registry),
    store: opts.store ? new StoreGauges({ ...opts.store, registry }) : null,
  };
}

/** The Prometheus text of a scrape: the store's gauges first (a failed read is counted below). */
export async function scrape(m: TowerMetrics): Promise<string> {
  const fromStore = m.store ? await m.store.text() : '';
  return fromStore + (await m.registry.metrics());
}

export function installMetrics(app: FastifyInstance, m: TowerMetrics): void {
  // One observation per request (a callback hook: no promise on the hot path).
  app.addHook('onResponse', (req, reply, done) => {
    m.latency.observe(
      { method: req.method, route: req.routeOptions.url ?? 'unmatched', code: reply.statusCode },
      reply.elapsedTime / 1000,
    );
    done();
  });
}
