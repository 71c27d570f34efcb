// Failed authentications are limited per client address before any credential is looked up
// (issue 27, case 6): past the limit an address gets 429 with Retry-After, good credentials
// the tower already knows still pass, and the next window lets the address try again.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestTower, type TestTower } from '../../../test/support/tower.js';
import { FakeClock } from '../../lib/clock.js';

describe('the per-address limit on failed authentications', () => {
  let t: TestTower;
  const clock = new FakeClock(Date.parse('2026-11-27T10:00:00Z'));

  beforeAll(async () => {
    t = await startTestTower('sqlite', { clock, authFailureLimit: { limit: 5, windowMs: 60_000 } });
  });
  afterAll(async () => {
    await t?.close();
  });

  it('answers 429 with Retry-After once an address has failed the limit, before authenticating', async () => {
    // The admin token is known to this tower before the guessing starts.
    expect((await t.call('GET', '/tokens')).status).toBe(200);
    const guesses = [];
    for (let i = 0; i < 5; i++)
      guesses.push((await t.call('GET', '/tokens', undefined, `svc_guess${i}`)).status);
    expect(guesses).toEqual([401, 401, 401, 401, 401]);
    const limited = await t.call('GET', '/tokens', undefined, 'svc_guess5');
    expect(limited.status).toBe(429);
    expect(limited.body.code).toBe('rate_limited');
    expect(limited.headers['retry-after']).toBe('60');
    // No credential at all is a failure too, and refused the same way.
    expect((await t.call('GET', '/tokens', undefined, null)).status).toBe(429);
    // A credential the tower knows is not a guess: it passes.
    expect((await t.call('GET', '/tokens')).status).toBe(200);
    // Public routes are not limited.
    expect((await t.call('GET', '/healthz', undefined, null)).status).toBe(200);

    await clock.advance(60_000);
    expect((await t.call('GET', '/tokens', undefined, 'svc_guess6')).status).toBe(401);
  });
});
