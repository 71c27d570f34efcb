// Prometheus metrics for one tower: request latencies (and so counts) by route pattern, never
// by raw URL, which would explode cardinality; plus Node's default process metrics.
import type { FastifyInstance } from 'fastify';
import { collectDefaultMetrics, Histogram, Registry } from 'prom-client';

export interface TowerMetrics {
  registry: Registry;
  /** Its _count series is the request count by method, route and status. */
  latency: Histogram<'method' | 'route' | 'status'>;
}

export function createMetrics(): TowerMetrics {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry, prefix: 'svc_tower_' });
  return {
    registry,
    latency: new Histogram({
      name: 'svc_http_request_duration_seconds',
      help: 'HTTP request latency by method, route pattern and status (the _count series counts requests)',
      labelNames: ['method', 'route', 'status'],
      buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5],
      registers: [registry],
    }),
  };
}

export function installMetrics(app: FastifyInstance, m: TowerMetrics): void {
  // One observation per request (a callback hook: no promise on the hot path).
  app.addHook('onResponse', (req, reply, done) => {
    m.latency.observe(
      { method: req.method, route: req.routeOptions.url ?? 'unmatched', status: reply.statusCode },
      reply.elapsedTime / 1000,
    );
    done();
  });
}
