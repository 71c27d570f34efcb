// Cron's metrics move as fires happen on the injected clock: fires and their delay past the
// scheduled minute, skips by reason, failures by outcome.
import { expect, it } from 'vitest';
import { at, signalJob, startCron, cronToml as toml, writeCronToml } from '../../../test/support/cron.js';
import { samples } from '../../../test/support/prom.js';
import { makeTempDir } from '../../../test/support/tmp.js';
import { createDaemonMetrics } from '../metrics.js';

it('counts fires, their delay, skips and failures', async () => {
  const tmp = makeTempDir('svc-cron-metrics-');
  writeCronToml(
    tmp.dir,
    toml(
      signalJob('ok', '* * * * *'),
      signalJob('broken', '* * * * *'),
      signalJob('off', '* * * * *', 'enabled = false'),
    ),
  );
  const metrics = createDaemonMetrics();
  const h = await startCron({
    home: tmp.dir,
    now: at('2025-06-02T09:59:30Z'),
    metrics: metrics.cron,
    signal: async (target) => {
      if (target === 'agent-broken') throw new Error('no such agent');
    },
  });
  try {
    // Started 30 s into a minute: its jobs fire now, 30 s late; the next minute's on time.
    await h.cron.idle();
    await h.clock.advance(30_000);
    await h.cron.idle();
    const m = samples(await metrics.registry.metrics());
    expect(m.get('svcd_cron_fires_total{job="ok"}')).toBe(2);
    expect(m.get('svcd_cron_fires_total{job="broken"}')).toBe(2);
    expect(m.get('svcd_cron_fires_total{job="off"}')).toBeUndefined();
    expect(m.get('svcd_cron_skips_total{job="off",reason="disabled"}')).toBe(2);
    expect(m.get('svcd_cron_failures_total{job="broken",outcome="failed"}')).toBe(2);
    expect(m.get('svcd_cron_failures_total{job="ok",outcome="failed"}')).toBeUndefined();
    expect(m.get('svcd_cron_fire_delay_seconds_count')).toBe(4);
    expect(m.get('svcd_cron_fire_delay_seconds_sum')).toBe(60);
    expect(m.get('svcd_cron_fire_delay_seconds_bucket{le="30"}')).toBe(4);
    expect(m.get('svcd_cron_fire_delay_seconds_bucket{le="10"}')).toBe(2);
  } finally {
    await h.stop();
    tmp.remove();
  }
});
