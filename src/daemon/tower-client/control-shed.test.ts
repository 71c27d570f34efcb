// svcd against a tower shedding load: a connect refused with 503 and Retry-After is not tried
// again before Retry-After has passed (spread over up to half again, so a fleet refused at once
// comes back spread out), and the refusal is what status reports.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openNodeChannel } from '../../../test/support/node-channel.js';
import { waitFor } from '../../../test/support/poll.js';
import { startTestTower, type TestTower } from '../../../test/support/tower.js';
import { FakeClock } from '../../lib/clock.js';
import { silentLogger } from '../../lib/log.js';
import { createControlChannel, reconnectDelay } from './control.js';

/** What the tower's channel limit answers with (src/tower/nodes/control-hub.ts). */
const CHANNELS_FULL_RETRY_AFTER_S = 5;

describe('svcd control channel against a tower at its channel limit', () => {
  let t: TestTower;
  let base: string;
  beforeAll(async () => {
    t = await startTestTower('sqlite', { maxNodeChannels: 1 });
    base = await t.tower.listen('127.0.0.1', 0);
  });
  afterAll(async () => {
    await t?.close();
  });

  const register = async (name: string) =>
    (await t.call('POST', '/nodes', { hostname: name })).body as { id: string; jwt: string };

  const connect = (jwt: string) => openNodeChannel(base, jwt);

  it('makes svcd wait out Retry-After before it dials again', async () => {
    const a = await register('limit-svcd-a');
    const b = await register('limit-svcd-b');
    const held = await connect(a.jwt);
    const clock = new FakeClock(Date.now());
    const control = createControlChannel({
      backendUrl: base,
      jwt: b.jwt,
      version: 'test',
      clock,
      log: silentLogger(),
      random: () => 0,
    });
    await control.start();
    await waitFor('the refusal', () => String(control.status?.().last_error ?? '').includes('503'));
    expect(control.status?.().last_error).toBe(
      `the tower is shedding load (503): retrying after ${CHANNELS_FULL_RETRY_AFTER_S} s or more`,
    );
    held.close();
    await waitFor('the held channel to go', () => !t.tower.nodes.isOnline(a.id));
    // The backoff alone would dial again after 0.5 s (random() = 0); Retry-After holds it back.
    await clock.advance(CHANNELS_FULL_RETRY_AFTER_S * 1000 - 1);
    expect(control.status?.()).toMatchObject({ connected: false, connects: 0 });
    await clock.advance(1);
    await control.waitConnected();
    expect(t.tower.nodes.isOnline(b.id)).toBe(true);
    await control.stop();
  });
});

describe('reconnectDelay', () => {
  it('is the backoff without Retry-After, and at least Retry-After spread over half again with it', () => {
    expect(reconnectDelay(700, null, () => 0.5)).toBe(700);
    expect(reconnectDelay(700, 5, () => 0)).toBe(5000);
    expect(reconnectDelay(700, 5, () => 0.999)).toBe(7498);
    expect(reconnectDelay(9000, 5, () => 0)).toBe(9000);
    expect(reconnectDelay(700, 0, () => 0)).toBe(700);
  });
});
