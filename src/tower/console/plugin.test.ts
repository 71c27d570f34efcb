import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeTempDir } from '../../../test/support/tmp.js';
import { startTestTower, type TestTower } from '../../../test/support/tower.js';
import { CONSOLE_CSP } from './plugin.js';

describe('console static serving', () => {
  let t: TestTower;
  let dir: string;
  beforeAll(async () => {
    dir = makeTempDir().dir;
    mkdirSync(join(dir, 'assets'));
    writeFileSync(join(dir, 'index.html'), '<!doctype html><script src="/assets/app-abc.js"></script>');
    writeFileSync(join(dir, 'assets', 'app-abc.js'), 'console.log(1)');
    t = await startTestTower('sqlite', { consoleDir: dir });
  });
  afterAll(() => t.tower.stop());

  it('serves index.html at / with no-cache and a strict CSP, without a credential', async () => {
    const res = await t.tower.app.inject({ method: 'GET', url: '/' });
    expect(res.statusCode).toBe(200);
    expect(res.headers['content-type']).toMatch(/^text\/html/);
    expect(res.headers['cache-control']).toBe('no-cache');
    expect(res.headers['content-security-policy']).toBe(CONSOLE_CSP);
    expect(res.headers['x-content-type-options']).toBe('nosniff');
    expect(res.body).toContain('/assets/app-abc.js');
  });

  it('serves hashed assets as immutable and answers If-None-Match with 304', async () => {
    const res = await t.tower.app.inject({ method: 'GET', url: '/assets/app-abc.js' });
    expect(res.statusCode).toBe(200);
    expect(res.headers['content-type']).toMatch(/^text\/javascript/);
    expect(res.headers['cache-control']).toContain('immutable');
    const again = await t.tower.app.inject({
      method: 'GET',
      url: '/assets/app-abc.js',
      headers: { 'if-none-match': String(res.headers.etag) },
    });
    expect(again.statusCode).toBe(304);
  });

  it('404s unknown assets and refuses path tricks', async () => {
    expect((await t.tower.app.inject({ method: 'GET', url: '/assets/nope.js' })).statusCode).toBe(404);
    // Only files read from the build at start are served: nothing maps outside it.
    const up = await t.tower.app.inject({ method: 'GET', url: '/assets/..%2f..%2fpackage.json' });
    expect(up.statusCode).toBe(404);
  });

  it('leaves API routes in place: they still need a credential', async () => {
    expect((await t.call('GET', '/domains', undefined, null)).status).toBe(401);
    expect((await t.call('GET', '/domains')).status).toBe(200);
  });

  it('says how to build when the console is missing', async () => {
    const bare = await startTestTower('sqlite', { consoleDir: makeTempDir().dir });
    try {
      const res = await bare.tower.app.inject({ method: 'GET', url: '/' });
      expect(res.statusCode).toBe(503);
      expect(JSON.parse(res.body).detail).toContain('npm run build');
    } finally {
      await bare.tower.stop();
    }
  });
});
