// Governed runs in the web console (chromium, a real tower, svcd and git): a task's page shows
// the approval its agent waits on, approving it there lets the run finish, and the page then
// shows the work kept on svc/<task_id> with its diff. The Approvals view shows the tool call
// and links to its task, where a rejection is made; a diff past the cap is marked truncated.
import { execFileSync } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  collectPageErrors,
  haveChromium,
  launchBrowser,
  screenshotDir,
  shot,
  signInPage,
} from '../support/browser.js';
import { type NodeStack, startNodeStack } from '../support/node-stack.js';
import { waitFor } from '../support/poll.js';

interface Task {
  id: string;
  state: string;
  result: Record<string, unknown> | null;
}

const AGENT = resolve(import.meta.dirname, '../support/governed-acp-agent.mjs');
const EXECUTE = 'Run echo built > built.txt';

describe.skipIf(!haveChromium)('governed runs in the web console (chromium, tower, svcd, git)', () => {
  const shots = screenshotDir();
  let stack: NodeStack;
  let domainId: string;
  let missionId: string;
  let repo: string;
  let browser: Browser;

  const api = async <T>(method: string, path: string, body?: unknown): Promise<T> => {
    const res = await stack.admin(method, path, body);
    const text = await res.text();
    if (res.status >= 400) throw new Error(`${method} ${path}: ${res.status} ${text}`);
    return JSON.parse(text) as T;
  };
  const git = (...args: string[]) => execFileSync('git', ['-C', repo, ...args], { encoding: 'utf8' }).trim();
  const submit = (title: string) =>
    api<Task>('POST', `/work/missions/${missionId}/tasks`, { title, max_attempts: 1 });

  const signedIn = () => signInPage(browser, stack.tower.url, stack.adminToken);

  beforeAll(async () => {
    stack = await startNodeStack({
      name: 'console-governed',
      hostname: 'governed-node',
      svcdFiles: {
        'config.toml': `[runtime.alpha_agent_acp]
command = [${JSON.stringify(process.execPath)}, ${JSON.stringify(AGENT)}]

[agent_policy]
approval_timeout = "10m"
approval_poll = "1s"
`,
      },
      beforeSvcd: async (s) => {
        ({ domainId, missionId } = await s.mission('gov', 'site'));
        repo = join(s.tmp.dir, 'repo');
        mkdirSync(repo);
        git('init', '-q', '-b', 'main');
        writeFileSync(join(repo, 'README.md'), 'hello\n');
        git('add', '-A');
        git('-c', 'user.name=t', '-c', 'user.email=t@t', 'commit', '-q', '-m', 'init');
        await s.admin('PATCH', `/domains/${domainId}/m/${missionId}`, { repository: repo });
      },
    });
    await stack.svc(['run', 'alpha_agent_acp', '--domain', domainId]);
    browser = await launchBrowser();
  }, 120_000);
  afterAll(async () => {
    await browser?.close();
    await stack?.stop();
  });

  it('shows the pending approval on the task page, approves it there, and shows the kept diff', async () => {
    const page = await signedIn();
    const errors = collectPageErrors(page);
    const task = await submit('build it');
    await page.goto(`${stack.tower.url}/#/task/${task.id}`);

    // The approval the run waits on: the tool call, its input without the token, Approve / Reject.
    const approvals = page.getByTestId('task-approvals');
    const pending = approvals.locator('li[data-status="pending"]');
    await pending.waitFor({ timeout: 60_000 });
    expect(await pending.getByTestId('tool-call').textContent()).toContain(`execute ${EXECUTE}`);
    const input = await pending.locator('pre').textContent();
    expect(input).toContain('echo built > built.txt');
    expect(input).toContain('[redacted]');
    expect(input).not.toContain('sk-live');
    await page.getByTestId('task-state').getByText('running').waitFor();
    await page.getByTestId('task-timeline').locator('li[data-action="approval_requested"]').waitFor();
    await shot(page, shots, 'task-approval');

    await pending.getByLabel(`Reason for execute: ${EXECUTE}`).fill('go ahead');
    await pending.getByRole('button', { name: 'Approve' }).click();
    await approvals.getByRole('status').getByText(`Approved “${EXECUTE}”.`).waitFor();

    // The run goes on and completes; the page shows what it kept, from the tower's own records.
    await page.getByTestId('task-state').getByText('completed').waitFor({ timeout: 60_000 });
    const done = await api<Task>('GET', `/work/tasks/${task.id}`);
    const branch = `svc/${task.id}`;
    expect(done.result).toMatchObject({ branch, files_changed: 2, insertions: 2, deletions: 0 });
    const changes = page.getByTestId('task-changes');
    await changes.getByText(branch).waitFor();
    expect(await changes.getByTestId('diffstat').textContent()).toBe('2 files +2 −0');
    const diff = changes.getByTestId('diff');
    await diff.waitFor();
    expect(await diff.locator('.d-add').allTextContents()).toEqual(['+built', '+governed']);
    expect(await diff.locator('.d-file').allTextContents()).toEqual([
      'diff --git a/built.txt b/built.txt',
      'diff --git a/notes.txt b/notes.txt',
    ]);
    expect(await changes.getByTestId('diff-truncated').count()).toBe(0);
    expect(git('show', `${branch}:notes.txt`)).toBe('governed');

    // Decided on the page: status, who, the reason; the timeline has the ask and the decision.
    const decided = approvals.locator('li[data-status="approved"]');
    expect(await decided.textContent()).toContain('go ahead');
    expect(await approvals.locator('li[data-status="pending"]').count()).toBe(0);
    const timeline = page.getByTestId('task-timeline');
    await timeline.locator('li[data-action="approval_approved"]').waitFor();
    expect(await timeline.locator('li[data-action="approval_requested"]').count()).toBe(1);
    expect(await timeline.locator('li[data-action="completed"]').count()).toBe(1);
    await shot(page, shots, 'task-changes');
    expect(errors).toEqual([]);
    await page.close();
  }, 180_000);

  it('shows a tool call in the Approvals view with a link to its task, rejected there; a big diff is marked truncated', async () => {
    const page = await signedIn();
    const errors = collectPageErrors(page);
    const task = await submit('write big notes');
    await waitFor(
      'the approval of the big notes task',
      async () =>
        (await api<{ items: unknown[] }>('GET', `/approvals?task_id=${task.id}&status=pending`)).items
          .length > 0,
      { timeoutMs: 60_000 },
    );
    await page.getByRole('link', { name: 'Approvals' }).click();
    const card = page.getByTestId('pending').locator('li', { hasText: EXECUTE });
    await card.getByTestId('tool-call').waitFor();
    expect(await card.locator('pre').textContent()).toContain('echo built > built.txt');
    await shot(page, shots, 'approvals-tool-call');
    await card.getByRole('link', { name: /^task / }).click();
    await page.waitForURL(`**/#/task/${task.id}`);

    const pending = page.getByTestId('task-approvals').locator('li[data-status="pending"]');
    await pending.getByLabel(`Reason for execute: ${EXECUTE}`).fill('not on this box');
    await pending.getByRole('button', { name: 'Reject' }).click();
    await page.getByTestId('task-state').getByText('completed').waitFor({ timeout: 60_000 });
    const rejected = page.getByTestId('task-approvals').locator('li[data-status="rejected"]');
    expect(await rejected.textContent()).toContain('not on this box');
    // Only the edit ran: one file, 4 001 lines, its diff past the cap.
    const changes = page.getByTestId('task-changes');
    expect(await changes.getByTestId('diffstat').textContent()).toBe('1 file +4001 −0');
    await changes.getByTestId('diff-truncated').waitFor();
    expect(await changes.getByTestId('diff').locator('.d-add').first().textContent()).toBe('+governed');
    const done = await api<Task>('GET', `/work/tasks/${task.id}`);
    expect(done.result).toMatchObject({ summary: 'edit: allowed; execute: refused', diff_truncated: true });
    expect(errors).toEqual([]);
    await page.close();
  }, 180_000);
});
