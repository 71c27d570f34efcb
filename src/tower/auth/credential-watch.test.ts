import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openStream } from '../../../test/support/feed-stream.js';
import { waitFor } from '../../../test/support/poll.js';
import { makeTempDir } from '../../../test/support/tmp.js';
import { startTestTower, type TestTower } from '../../../test/support/tower.js';
import { FakeClock } from '../../lib/clock.js';
import { silentLogger } from '../../lib/log.js';
import { createTower, type Tower } from '../tower.js';
import { RECHECK_MS } from './credential-watch.js';

describe('stream re-checks across PostgreSQL replicas', () => {
  let a: TestTower;
  let b: Tower;
  let bUrl: string;
  const bClock = new FakeClock(Date.parse('2026-11-23T10:00:00Z'));
  const bDir = makeTempDir('svc-watch-');

  beforeAll(async () => {
    a = await startTestTower('postgres');
    b = await createTower({ database: a.databaseUrl, dataDir: bDir.dir, log: silentLogger(), clock: bClock });
    bUrl = await b.listen('127.0.0.1', 0);
  });
  afterAll(async () => {
    await b?.stop();
    await a?.close();
    bDir.remove();
  });

  it('closes a stream on one replica at its next re-check when the token is revoked on another', async () => {
    const tok = (await a.call('POST', '/tokens', { name: 'x-replica', scopes: ['feed:read'] })).body as {
      id: string;
      token: string;
    };
    const other = (await a.call('POST', '/tokens', { name: 'stays', scopes: ['feed:read'] })).body as {
      token: string;
    };
    const revoked = openStream(`${bUrl}/events/stream`, tok.token);
    const kept = openStream(`${bUrl}/events/stream`, other.token);
    await waitFor('both streams on replica b', () => revoked.status() === 200 && kept.status() === 200);
    expect((await a.call('DELETE', `/tokens/${tok.id}`)).status).toBe(200);
    // Replica b still holds the credential in its auth cache; one re-check period later the
    // stream is closed all the same (the re-check looks past the cache).
    await bClock.advance(RECHECK_MS);
    await waitFor('the revoked stream to close', () => revoked.ended());
    expect(kept.ended()).toBe(false);
    await kept.close();
  });
});
