// svcd's Prometheus metrics (docs/operations.md#metrics): one Registry per daemon, built by the
// composition root, which hands each component its small part; nothing here is global. Served
// as GET /metrics on the fan-out listener and by the mgmt.sock method daemon.metrics. A leaf:
// it imports prom-client only. No default process metrics: an idle svcd is held to a memory
// budget (bench/daemon), and the host's exporter sees the process anyway.
import { Counter, Gauge, Histogram, Registry } from 'prom-client';

export interface SupervisorMetrics {
  /** Agent restarts by agent id and cause: watchdog (found dead), nightly, manual. */
  restarts: Counter<'agent' | 'cause'>;
  /** What the watchdog did: restart, nightly_restart, give_up. */
  watchdogActions: Counter<'action'>;
}

export interface CronMetrics {
  fires: Counter<'job'>;
  skips: Counter<'job' | 'reason'>;
  /** Fires that ended other than ok: failed, timeout, interrupted. */
  failures: Counter<'job' | 'outcome'>;
  /** From the scheduled minute to the dispatch. */
  fireDelay: Histogram<never>;
}

export interface WorkerMetrics {
  /** Subagent runs by how they ended: completed, failed, cancelled, abandoned. */
  runs: Counter<'outcome'>;
}

export interface SecretsMetrics {
  /** secrets.sock replies: ok or the error code. */
  requests: Counter<'outcome'>;
}

export interface FanoutMetrics {
  /** From a tower event's timestamp to its relay to local consumers. */
  relayLag: Histogram<never>;
  /** Where the subscribers gauge reads (the listener's consumer count), set when it starts. */
  countSubscribers(fn: (() => number) | null): void;
}

export interface DaemonMetrics {
  registry: Registry;
  supervisor: SupervisorMetrics;
  cron: CronMetrics;
  worker: WorkerMetrics;
  secrets: SecretsMetrics;
  fanout: FanoutMetrics;
}

const LAG_BUCKETS = [0.005, 0.01, 0.05, 0.1, 0.5, 1, 2, 5, 10, 30, 60];

export function createDaemonMetrics(): DaemonMetrics {
  const registry = new Registry();
  const registers = [registry];
  let subscribers: (() => number) | null = null;
  new Gauge({
    name: 'svcd_fanout_subscribers',
    help: 'Local consumers of the fan-out (/events, /events/ws, events.subscribe)',
    registers,
    collect() {
      this.set(subscribers?.() ?? 0);
    },
  });
  return {
    registry,
    supervisor: {
      restarts: new Counter({
        name: 'svcd_agent_restarts_total',
        help: 'Agent restarts by agent and cause (watchdog: found dead; nightly; manual)',
        labelNames: ['agent', 'cause'],
        registers,
      }),
      watchdogActions: new Counter({
        name: 'svcd_watchdog_actions_total',
        help: 'Watchdog actions: restart, nightly_restart, give_up (dead again after a restart)',
        labelNames: ['action'],
        registers,
      }),
    },
    cron: {
      fires: new Counter({
        name: 'svcd_cron_fires_total',
        help: 'Cron fires dispatched, by job',
        labelNames: ['job'],
        registers,
      }),
      skips: new Counter({
        name: 'svcd_cron_skips_total',
        help: 'Due cron minutes not run, by job and reason (overlap, disabled, missed_while_down, state_unwritable)',
        labelNames: ['job', 'reason'],
        registers,
      }),
      failures: new Counter({
        name: 'svcd_cron_failures_total',
        help: 'Cron fires that did not end ok, by job and outcome (failed, timeout, interrupted)',
        labelNames: ['job', 'outcome'],
        registers,
      }),
      fireDelay: new Histogram({
        name: 'svcd_cron_fire_delay_seconds',
        help: "From a fire's scheduled minute to its dispatch (cron lag)",
        buckets: LAG_BUCKETS,
        registers,
      }),
    },
    worker: {
      runs: new Counter({
        name: 'svcd_worker_runs_total',
        help: 'Mesh task runs in subagents by outcome (completed, failed, cancelled, abandoned)',
        labelNames: ['outcome'],
        registers,
      }),
    },
    secrets: {
      requests: new Counter({
        name: 'svcd_secrets_requests_total',
        help: 'secrets.sock requests by outcome (ok or the error code)',
        labelNames: ['outcome'],
        registers,
      }),
    },
    fanout: {
      relayLag: new Histogram({
        name: 'svcd_fanout_relay_lag_seconds',
        help: "From a tower event's timestamp to its relay to local consumers",
        buckets: LAG_BUCKETS,
        registers,
      }),
      countSubscribers(fn) {
        subscribers = fn;
      },
    },
  };
}

/** What daemon.metrics answers: the exposition text and the same samples as JSON. */
export async function metricsSnapshot(m: DaemonMetrics): Promise<{ text: string; metrics: unknown }> {
  return { text: await m.registry.metrics(), metrics: await m.registry.getMetricsAsJSON() };
}
