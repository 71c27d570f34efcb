// Gauges read from the store at scrape time: live mesh tasks by mission and state, agents by
// presence, pending approvals. A query, not counters kept in memory, because every replica
// sharing one PostgreSQL sees the same rows. A scrape never waits on a slow store: past the
// timeout (or on an error) these gauges are left out of that scrape and the failure is counted;
// concurrent scrapes share one read.
import { sql } from 'kysely';
import { Counter, Gauge, Registry } from 'prom-client';
import type { Clock } from '../../lib/clock.js';
import type { Db } from '../store/types.js';

/** Short next to a scrape interval (15 s) and the request deadline. */
export const STORE_SCRAPE_TIMEOUT_MS = 2000;

export interface StoreGaugesOptions {
  db: Db;
  clock: Clock;
  /** Where the failure counter goes (the tower's registry: it is served even when these are not). */
  registry: Registry;
  timeoutMs?: number;
}

export class StoreGauges {
  /** Served only after a successful read. */
  readonly registry = new Registry();
  private readonly tasks = new Gauge({
    name: 'svc_mesh_tasks',
    help: 'Live mesh tasks (pending, claimed, running) by mission and state; finished ones: svc_mesh_tasks_finished_total',
    labelNames: ['mission_id', 'state'],
    registers: [this.registry],
  });
  private readonly agents = new Gauge({
    name: 'svc_agents',
    help: 'Enrolled agents by presence (the status their node reports: idle, busy, offline, …)',
    labelNames: ['presence'],
    registers: [this.registry],
  });
  private readonly approvals = new Gauge({
    name: 'svc_approvals_pending',
    help: 'Approvals waiting for a decision',
    registers: [this.registry],
  });
  private readonly failures: Counter<'reason'>;
  private reading: Promise<string> | null = null;

  constructor(private readonly opts: StoreGaugesOptions) {
    this.failures = new Counter({
      name: 'svc_metrics_store_read_failures_total',
      help: 'Scrapes that served no store gauges: the store read timed out or failed',
      labelNames: ['reason'],
      registers: [opts.registry],
    });
  }

  /** These gauges in the Prometheus text format, or '' when the store did not answer in time. */
  text(): Promise<string> {
    this.reading ??= this.readBounded().finally(() => {
      this.reading = null;
    });
    return this.reading;
  }

  private readBounded(): Promise<string> {
    const ms = this.opts.timeoutMs ?? STORE_SCRAPE_TIMEOUT_MS;
    return new Promise<string>((resolve) => {
      const timer = this.opts.clock.setTimeout(() => {
        this.failures.inc({ reason: 'timeout' });
        resolve('');
      }, ms);
      this.read().then(
        async () => {
          timer.cancel();
          resolve(await this.registry.metrics());
        },
        () => {
          timer.cancel();
          this.failures.inc({ reason: 'error' });
          resolve('');
        },
      );
    }).catch(() => '');
  }

  private async read(): Promise<void> {
    const { db } = this.opts;
    // Two arms so each uses its partial index (mesh_tasks_pending, mesh_tasks_leased): finished
    // tasks, however many, are never read.
    const [tasks, agents, approvals] = await Promise.all([
      sql<{ mission_id: string; state: string; n: number | string }>`
        select mission_id, state, count(*) as n from mesh_tasks where state = 'pending'
          group by mission_id, state
        union all
        select mission_id, state, count(*) as n from mesh_tasks where state in ('claimed', 'running')
          group by mission_id, state`.execute(db),
      db
        .selectFrom('agents')
        .select(['status', db.fn.countAll<number | string>().as('n')])
        .groupBy('status')
        .execute(),
      db
        .selectFrom('approvals')
        .select(db.fn.countAll<number | string>().as('n'))
        .where('status', '=', 'pending')
        .executeTakeFirst(),
    ]);
    // Series of missions with no live task (and presences no agent has) go.
    this.tasks.reset();
    for (const r of tasks.rows) this.tasks.set({ mission_id: r.mission_id, state: r.state }, Number(r.n));
    this.agents.reset();
    for (const r of agents) this.agents.set({ presence: r.status }, Number(r.n));
    this.approvals.set(Number(approvals?.n ?? 0));
  }
}
