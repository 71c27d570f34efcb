// The web console in Debian chromium against a real `svc tower serve`.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { collectPageErrors, haveChromium, launchBrowser, screenshotDir, shot } from '../support/browser.js';
import { startTowerProc, stopAll, type TowerProc } from '../support/procs.js';
import { makeTempDir } from '../support/tmp.js';

describe.skipIf(!haveChromium)('web console (chromium)', () => {
  let browser: Browser;
  let tower: TowerProc;
  let admin: string;
  const shots = screenshotDir();

  const call = async (method: string, path: string, body?: unknown, token = admin) => {
    const res = await fetch(`${tower.url}${path}`, {
      method,
      headers: {
        authorization: `Bearer ${token}`,
        ...(body !== undefined ? { 'content-type': 'application/json' } : {}),
      },
      ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
    });
    const json = (await res.json()) as Record<string, unknown>;
    if (!res.ok) throw new Error(`${method} ${path}: ${res.status} ${JSON.stringify(json)}`);
    return json;
  };

  beforeAll(async () => {
    const home = join(makeTempDir().dir, 'home');
    tower = await startTowerProc({ SVC_HOME: home });
    admin = readFileSync(join(home, 'tower', 'admin.token'), 'utf8').trim();
    browser = await launchBrowser();
  });
  afterAll(async () => {
    await browser?.close();
    await stopAll();
  });

  it('signs in with a token, shows only the domains it may see, signs out', async () => {
    const a = await call('POST', '/domains', { name: 'alpha' });
    await call('POST', '/domains', { name: 'beta' });
    await call('POST', `/domains/${a.id}/m`, { name: 'launch' });
    const limited = await call('POST', '/tokens', {
      name: 'alpha-reader',
      scopes: ['feed:read'],
      domains: [a.id],
    });

    const page = await browser.newPage({ viewport: { width: 1440, height: 900 } });
    const errors = collectPageErrors(page);
    const res = await page.goto(tower.url);
    expect(res?.headers()['content-security-policy']).toContain("default-src 'none'");
    await page.getByLabel('Token').fill('svc_not-a-real-token');
    await page.getByRole('button', { name: 'Sign in' }).click();
    await expect.poll(() => page.getByRole('alert').textContent()).toMatch(/token/i);
    await shot(page, shots, 'signin');

    await page.getByLabel('Token').fill(String(limited.token));
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('heading', { name: 'alpha' }).waitFor();
    await page.getByText('launch').waitFor();
    expect(await page.getByRole('heading', { name: 'beta' }).count()).toBe(0);
    // The token is in this tab's session storage, never in the URL.
    expect(page.url()).not.toContain(String(limited.token));
    expect(await page.evaluate(() => sessionStorage.getItem('svc.token'))).toBe(limited.token);
    await shot(page, shots, 'domains');

    // A reload keeps the session; sign out forgets it.
    await page.reload();
    await page.getByRole('heading', { name: 'alpha' }).waitFor();
    await page.getByRole('button', { name: 'Sign out' }).click();
    await page.getByLabel('Token').waitFor();
    expect(await page.evaluate(() => sessionStorage.getItem('svc.token'))).toBeNull();
    expect(errors.filter((e) => !e.includes('401'))).toEqual([]);
    await page.close();
  });

  it('shows the recent history at once, older pages on demand, with names rather than ids', async () => {
    const d = await call('POST', '/domains', { name: 'history' });
    for (let i = 0; i < 110; i++) await call('POST', `/domains/${d.id}/m`, { name: `mission-${i}` });
    const page = await browser.newPage({ viewport: { width: 1440, height: 900 } });
    const errors = collectPageErrors(page);
    await page.goto(tower.url);
    await page.getByLabel('Token').fill(admin);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('link', { name: 'Feed' }).click();
    // The newest 100 at once, no new event needed; the newest first.
    const rows = page.getByTestId('feed').locator('tbody tr');
    await expect.poll(() => rows.count()).toBe(100);
    expect(await rows.first().textContent()).toContain('mission-109');
    expect(await page.getByText('No events yet').count()).toBe(0);
    // Names, not ids: the domain by name, its id on hover; times as "… ago", full on hover.
    const domainRef = rows.first().locator('[data-ref="domain"] [title]');
    // The names arrive with the directory (loaded at sign-in, again for an unknown id): poll.
    await expect.poll(() => domainRef.textContent()).toBe('history');
    expect(await domainRef.getAttribute('title')).toBe(`domain ${d.id}`);
    expect(await page.getByTestId('feed').textContent()).not.toContain(String(d.id));
    expect(await rows.first().locator('time').textContent()).toMatch(/just now|s ago/);
    await shot(page, shots, 'feed-history', false);
    // Older pages until the first event the tower keeps: the domain's creation.
    while ((await page.getByTestId('feed-start').count()) === 0) {
      await page.getByRole('button', { name: 'Load older events' }).click();
      await page
        .getByRole('button', { name: 'Load older events' })
        .or(page.getByTestId('feed-start'))
        .waitFor();
    }
    await page
      .getByTestId('feed')
      .getByText(/: mission-0$/)
      .waitFor();
    await page
      .getByTestId('feed')
      .locator('tr', { hasText: 'domain created' })
      .getByText('history')
      .first()
      .waitFor();
    // Filters are choices among names.
    await page.getByLabel('Domain').selectOption({ label: 'history' });
    await page.getByLabel('Mission').selectOption({ label: 'mission-7' });
    await expect.poll(() => rows.count()).toBe(1);
    expect(errors).toEqual([]);
    await page.close();
  });

  it('shows an event arriving live, filters by type, and a banner once the tower is gone', async () => {
    const d = await call('POST', '/domains', { name: 'feedy' });
    const page = await browser.newPage({ viewport: { width: 1440, height: 900 } });
    await page.goto(tower.url);
    await page.getByLabel('Token').fill(admin);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('link', { name: 'Feed' }).click();
    await expect.poll(() => page.getByTestId('feed-state').textContent()).toBe('live');

    await call('POST', '/approvals', { domain_id: d.id, title: 'ship the console?' });
    await page.getByTestId('feed').getByText('ship the console?').first().waitFor();
    await page.getByTestId('rate-limit').waitFor();
    await shot(page, shots, 'feed', false);

    // Approve it in the Approvals view and see the decision arrive in the feed.
    await page.getByRole('link', { name: 'Approvals' }).click();
    await page.getByLabel('Reason for ship the console?').fill('looks good');
    await shot(page, shots, 'approvals');
    await page.getByRole('button', { name: 'Approve' }).click();
    await page.getByRole('status').getByText('Approved').waitFor();
    await page.getByTestId('decided').getByText('looks good').waitFor();
    await page.getByRole('button', { name: 'Approve' }).waitFor({ state: 'detached' });
    await page.getByRole('link', { name: 'Feed' }).click();
    await expect.poll(() => page.getByTestId('feed').getByText('approved').count()).toBeGreaterThan(0);

    // Only progress events: the approval is filtered out, a new one is not shown either.
    await page.getByLabel('Type').selectOption('progress');
    await expect.poll(() => page.getByTestId('feed').getByText('ship the console?').count()).toBe(0);
    await page.getByLabel('Type').selectOption('');
    await page.getByTestId('feed').getByText('ship the console?').first().waitFor();

    // A registered node with no svcd connected shows as offline.
    await call('POST', '/nodes', { hostname: 'box-1' });
    await page.getByRole('link', { name: 'Nodes' }).click();
    await page
      .getByRole('heading', { name: /box-1/ })
      .getByTestId('node-state')
      .getByText('offline')
      .waitFor();
    await shot(page, shots, 'nodes');

    tower.kill('SIGTERM');
    await tower.exited;
    await page.getByTestId('feed-banner').waitFor();
    await shot(page, shots, 'feed-down');
    await page.close();
  });
});
