// Prometheus metrics for one tower: request counts and latencies by route pattern (never by
// raw URL, which would explode cardinality), plus Node's default process metrics.
import type { FastifyInstance } from 'fastify';
import { Counter, collectDefaultMetrics, Histogram, Registry } from 'prom-client';

export interface TowerMetrics {
  registry: Registry;
  requests: Counter<'method' | 'route' | 'status'>;
  latency: Histogram<'method' | 'route'>;
}

export function createMetrics(): TowerMetrics {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry, prefix: 'svc_tower_' });
  return {
    registry,
    requests: new Counter({
      name: 'svc_http_requests_total',
      help: 'HTTP requests by method, route pattern and status',
      labelNames: ['method', 'route', 'status'],
      registers: [registry],
    }),
    latency: new Histogram({
      name: 'svc_http_request_duration_seconds',
      help: 'HTTP request latency by method and route pattern',
      labelNames: ['method', 'route'],
      buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5],
      registers: [registry],
    }),
  };
}

export function installMetrics(app: FastifyInstance, m: TowerMetrics): void {
  app.addHook('onResponse', async (req, reply) => {
    const route = req.routeOptions.url ?? 'unmatched';
    m.requests.inc({ method: req.method, route, status: String(reply.statusCode) });
    m.latency.observe({ method: req.method, route }, reply.elapsedTime / 1000);
  });
}
