import { afterEach, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { startTestTower, type TestTower } from '../../../test/support/tower.js';

/** The extensions the tower agreed to when a client offers per-message deflate. */
async function negotiated(t: TestTower): Promise<string> {
  const base = await t.tower.listen('127.0.0.1', 0);
  const ws = new WebSocket(`${base.replace('http', 'ws')}/events/ws`, {
    headers: { authorization: `Bearer ${t.adminToken}` },
    perMessageDeflate: true,
  });
  await new Promise((resolve, reject) => {
    ws.once('open', resolve);
    ws.once('error', reject);
  });
  const ext = ws.extensions;
  ws.close();
  return ext;
}

describe('/events/ws compression', () => {
  let t: TestTower | null = null;
  afterEach(async () => {
    await t?.close();
    t = null;
  });

  it('refuses per-message deflate by default, even when the client asks', async () => {
    t = await startTestTower('sqlite');
    expect(await negotiated(t)).toBe('');
  });

  it('agrees to per-message deflate when the tower is configured for it and the client asks', async () => {
    t = await startTestTower('sqlite', { wsCompression: true });
    expect(await negotiated(t)).toContain('permessage-deflate');
  });
});
