// Debian chromium driven by playwright-core for the console's e2e tests. Headless, no
// network beyond the tower under test, a fresh profile per launch.
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { type Browser, chromium, type Page } from 'playwright-core';
import { makeTempDir } from './tmp.js';

export const CHROMIUM = process.env.SVC_TEST_CHROMIUM ?? '/usr/bin/chromium';
export const haveChromium = existsSync(CHROMIUM);

export async function launchBrowser(): Promise<Browser> {
  // playwright gives every launch a fresh temporary --user-data-dir and removes it at close.
  return chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: [
      '--headless',
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
    ],
  });
}

/** A directory for the screenshots of one test file (docs/console.md shows copies of them). */
export function screenshotDir(): string {
  const dir = process.env.SVC_SCREENSHOT_DIR ?? makeTempDir('svc-console-shots-').dir;
  return dir;
}

/** `fullPage: false`: the viewport only (a long list). */
export async function shot(page: Page, dir: string, name: string, fullPage = true): Promise<string> {
  const path = join(dir, `${name}.png`);
  await page.screenshot({ path, fullPage });
  return path;
}

/** Fails the test on any console error or CSP violation in the page. */
export function collectPageErrors(page: Page): string[] {
  const errors: string[] = [];
  page.on('pageerror', (e) => errors.push(`pageerror: ${e.message}`));
  page.on('console', (m) => {
    if (m.type() === 'error') errors.push(`console: ${m.text()}`);
  });
  return errors;
}

/** A new 1440x900 page of the console at `url`, signed in with `token` (the nav is up). */
export async function signInPage(browser: Browser, url: string, token: string): Promise<Page> {
  const page = await browser.newPage({ viewport: { width: 1440, height: 900 } });
  await page.goto(url);
  await page.getByLabel('Token').fill(token);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.getByRole('link', { name: 'Feed' }).waitFor();
  return page;
}

/** The text of the console's attached terminal: its xterm buffer, scrollback included. */
export function terminalText(page: Page): Promise<string> {
  return page.evaluate(() => {
    const el = document.querySelector('[data-testid="terminal"]') as
      | (HTMLElement & {
          xterm?: {
            buffer: {
              active: {
                length: number;
                getLine(i: number): { translateToString(trim: boolean): string } | undefined;
              };
            };
          };
        })
      | null;
    const b = el?.xterm?.buffer.active;
    if (!b) return '';
    const lines: string[] = [];
    for (let i = 0; i < b.length; i++) lines.push(b.getLine(i)?.translateToString(true) ?? '');
    return lines.join('\n');
  });
}
