// Shutdown: from the moment stop() begins the tower refuses new requests (a feed stream
// opened then would never hear the shutdown and would hold the HTTP server open), open
// streams end, and stop() resolves even while a client keeps reconnecting, as svcd does.
import { describe, expect, it } from 'vitest';
import { startTestTower } from '../../test/support/tower.js';

describe('tower shutdown', () => {
  it('ends open streams and stops while a client keeps reopening its stream', async () => {
    const t = await startTestTower('sqlite');
    const url = await t.tower.listen('127.0.0.1', 0);
    const auth = { authorization: `Bearer ${t.adminToken}` };
    const open = await fetch(`${url}/events/stream`, { headers: auth });
    expect(open.status).toBe(200);
    const drained = open.text(); // resolves when the tower ends the stream

    let stopped = false;
    const statuses: number[] = [];
    const reconnecting = (async () => {
      while (!stopped) {
        try {
          const r = await fetch(`${url}/events/stream`, { headers: auth });
          statuses.push(r.status);
          await r.text();
        } catch {
          // connection refused or reset: the server is closing
        }
      }
    })();
    const stopping = t.tower.stop();
    expect(await drained).toContain('tower shutting down');
    await stopping;
    stopped = true;
    await reconnecting;
    // Whatever got through while stopping was refused, not left open.
    expect(statuses.filter((s) => s !== 200 && s !== 503)).toEqual([]);
    await t.close();
  });

  it('answers 503 unavailable to a request that arrives once stop() has begun', async () => {
    const t = await startTestTower('sqlite');
    const stopping = t.tower.stop();
    // inject bypasses the socket: the request reaches the hooks although the server closes.
    const r = await t.tower.app.inject({ method: 'GET', url: '/healthz' });
    expect(r.statusCode).toBe(503);
    await stopping;
    await t.close();
  });
});
