// The supervisor's metrics move with real processes and the watchdog on a FakeClock: a kill -9
// → a watchdog restart, dying again at once → a give-up, an operator's restart → manual.
import { writeFileSync } from 'node:fs';
import { afterEach, expect, it } from 'vitest';
import { makeTestDaemonContext, type TestDaemonContext } from '../../../test/support/daemon-ctx.js';
import { waitFor } from '../../../test/support/poll.js';
import { samples } from '../../../test/support/prom.js';
import { FakeClock } from '../../lib/clock.js';
import { createDaemonMetrics } from '../metrics.js';
import { defaultSvcdConfig } from '../svcd-config.js';
import { createSupervisor, type Supervisor } from './supervisor.js';

const S = 1000;
const T0 = Date.parse('2025-06-10T10:00:00Z');
let t: TestDaemonContext | null = null;
let sup: Supervisor | null = null;

afterEach(async () => {
  await sup?.stop();
  await t?.close();
});

it('counts restarts by cause and the watchdog actions', async () => {
  const clock = new FakeClock(T0);
  t = await makeTestDaemonContext({ clock });
  writeFileSync(
    t.ctx.paths.agentsToml,
    '[[agent]]\nid = "sleeper"\nruntime = "alpha_code"\nsupervise = true\ncommand = ["sleep", "600"]\n',
  );
  const config = defaultSvcdConfig();
  config.supervisor.stopGraceMs = 2000;
  // Polls are made by hand at exact seconds.
  config.watchdog.pollMs = 24 * 3600 * S;
  const metrics = createDaemonMetrics();
  const s = createSupervisor(t.ctx, { config, userBus: false, metrics: metrics.supervisor });
  sup = s;
  await s.start();
  const pid = () => s.listAgents().find((a) => a.id === 'sleeper')?.pid as number;
  const kill = async () => {
    process.kill(pid(), 'SIGKILL');
    await waitFor('the exit', () => s.listAgents()[0]?.state === 'dead');
  };
  const m = async () => samples(await metrics.registry.metrics());

  await kill();
  await clock.set(T0 + 10 * S);
  await s.poll();
  expect((await m()).get('svcd_agent_restarts_total{agent="sleeper",cause="watchdog"}')).toBe(1);
  expect((await m()).get('svcd_watchdog_actions_total{action="restart"}')).toBe(1);
  await kill();
  await clock.set(T0 + 100 * S);
  await s.poll();
  expect((await m()).get('svcd_watchdog_actions_total{action="give_up"}')).toBe(1);
  await s.restartAgent('sleeper');
  const after = await m();
  expect(after.get('svcd_agent_restarts_total{agent="sleeper",cause="manual"}')).toBe(1);
  expect(after.get('svcd_agent_restarts_total{agent="sleeper",cause="watchdog"}')).toBe(1);
  expect(after.get('svcd_watchdog_actions_total{action="restart"}')).toBe(1);
});
