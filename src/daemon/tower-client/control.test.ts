import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { waitFor } from '../../../test/support/poll.js';
import { startTestTower, type TestTower } from '../../../test/support/tower.js';
import { FakeClock } from '../../lib/clock.js';
import { silentLogger } from '../../lib/log.js';
import { createControlChannel } from './control.js';

describe('svcd control channel client', () => {
  let t: TestTower;
  let url: string;
  beforeAll(async () => {
    t = await startTestTower('sqlite');
    url = await t.tower.listen('127.0.0.1', 0);
  });
  afterAll(async () => {
    await t?.close();
  });

  it('says hello, receives task_ready, and reconnects after the tower drops it', async () => {
    const node = (await t.call('POST', '/nodes', { hostname: 'ctl-client' })).body as {
      id: string;
      jwt: string;
    };
    const d = (await t.call('POST', '/domains', { name: 'ctl-client' })).body as { id: string };
    const m = (await t.call('POST', `/domains/${d.id}/m`, { name: 'm' })).body as { id: string };
    const agent = (await t.call('POST', '/agents', { domain_id: d.id, runtime: 'beta_cli' }, node.jwt))
      .body as { id: string };
    const statusOf = async () => (await t.call('GET', `/agents/${agent.id}`)).body.status;
    const clock = new FakeClock(Date.now());
    const control = createControlChannel({
      backendUrl: url,
      jwt: node.jwt,
      version: 'test',
      clock,
      log: silentLogger(),
      random: () => 0,
    });
    const ready: string[] = [];
    control.on('task_ready', (msg) => ready.push(msg.task_id));
    await control.start();
    await control.waitConnected();
    expect(control.connected).toBe(true);
    expect(t.tower.nodes.attachSecret(node.id)).toBe(control.attachSecret);
    const task = (await t.call('POST', `/work/missions/${m.id}/tasks`, { title: 'x' })).body as {
      id: string;
    };
    await waitFor('task_ready', () => ready.includes(task.id));
    // Presence: sent at once while connected, and again in the hello after a reconnect.
    control.setAgentStatus(agent.id, 'busy');
    await waitFor('busy on the tower', async () => (await statusOf()) === 'busy');

    t.tower.nodes.closeAll();
    await waitFor('the drop to be noticed', () => !control.connected);
    expect(control.status?.()).toMatchObject({ connected: false, connects: 1 });
    // Backoff runs on the injected clock: 0.5 s with random() = 0.
    await clock.advance(500);
    await waitFor('reconnected', () => control.connected);
    expect(control.status?.()).toMatchObject({ connected: true, connects: 2 });
    await waitFor('busy again after the hello', async () => (await statusOf()) === 'busy');
    control.setAgentStatus(agent.id, null);
    await waitFor('offline when the agent stops', async () => (await statusOf()) === 'offline');
    await control.stop();
    await waitFor('the tower to see it go', () => !t.tower.nodes.isOnline(node.id));
  });

  it('reports a refused credential and keeps retrying', async () => {
    const clock = new FakeClock(Date.now());
    const control = createControlChannel({
      backendUrl: url,
      jwt: 'not-a-jwt',
      version: 'test',
      clock,
      log: silentLogger(),
    });
    await control.start();
    await waitFor('the refusal', () => String(control.status?.().last_error ?? '').includes('401'));
    expect(control.connected).toBe(false);
    await control.stop();
  });
});
