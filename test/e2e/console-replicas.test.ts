// The web console in Debian chromium against two tower replicas on one PostgreSQL schema
// behind a real HAProxy, with a real svcd connected through it: the node page shows the node
// online with its agents, restarts an agent and opens its terminal — through the balancer
// (requests land on both replicas) and directly at the replica that does not hold the node's
// control channel (every node request, action and attach is handed to the other one). The
// feed page, through the balancer, shows live the events written on either replica.
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mgmtCall } from '../../src/cli/mgmt-client.js';
import {
  collectPageErrors,
  haveChromium,
  launchBrowser,
  signInPage,
  terminalText,
} from '../support/browser.js';
import { haproxyInstalled } from '../support/haproxy.js';
import { waitFor } from '../support/poll.js';
import { SVCD_BIN } from '../support/procs.js';
import { type ReplicaNode, startReplicaNode } from '../support/replica-node.js';

const HOST = 'lb-node';

describe.skipIf(!haveChromium || !haproxyInstalled())(
  'web console behind HAProxy (two replicas, chromium, svcd)',
  () => {
    let n: ReplicaNode;
    let domainId: string;
    let ttyAgent: string;
    let browser: Browser;

    const signedIn = (base: string) => signInPage(browser, base, n.r.admin);

    /** The other replica than the one holding the node's channel. */
    const otherReplica = async () => {
      const holder = await waitFor('presence in the store', () => n.holderIndex());
      return { holder, other: 1 - holder };
    };

    /**
     * On the node page at `base`: the node online with its agents, Restart gives the agent a new
     * process (pid and restart count on the page move), and its terminal echoes what is typed.
     */
    async function nodePageRestartAndTerminal(base: string, text: string) {
      const page = await signedIn(base);
      const errors = collectPageErrors(page);
      await page.getByRole('link', { name: 'Nodes' }).click();
      const card = page.getByRole('article', { name: `node ${HOST}` });
      await card.getByTestId('node-state').getByText('online').waitFor();
      await card.getByTestId('enrolled').getByText('tty').waitFor();
      const row = card.getByTestId('supervision').locator(`tr[data-agent="${ttyAgent}"]`);
      await row.getByTestId('unit-state').getByText('running').waitFor();
      const pidOnPage = async () =>
        /pid (\d+)/.exec((await row.getByTestId('unit-state').textContent()) ?? '')?.[1];
      const pid = await waitFor('the pid on the page', pidOnPage);
      const restarts = Number(await row.getByTestId('restarts').textContent());
      // The page shows what the node says: the same pid as its mgmt.sock.
      const local = await mgmtCall<{ items: { id: string; pid: number | null }[] }>(n.mgmtSock, 'agent.list');
      expect(String(local.items.find((a) => a.id === ttyAgent)?.pid)).toBe(pid);

      await page.getByRole('button', { name: 'Restart tty' }).click();
      await card.getByRole('status').getByText('Restarted tty: running.').waitFor();
      await expect.poll(pidOnPage, { timeout: 30_000 }).not.toBe(pid);
      await expect.poll(() => row.getByTestId('restarts').textContent()).toBe(String(restarts + 1));
      expect(await row.textContent()).toContain('(manual)');

      await page.getByRole('link', { name: 'Terminal of tty' }).click();
      await page.getByTestId('terminal-status').getByText(`Attached to tty on ${HOST}.`).waitFor();
      await page.keyboard.type(text);
      await page.keyboard.press('Enter');
      await expect.poll(() => terminalText(page), { timeout: 15_000 }).toContain(`echo: ${text}`);
      expect(errors).toEqual([]);
      await page.close();
    }

    beforeAll(async () => {
      n = await startReplicaNode({
        hostname: HOST,
        beforeSvcd: async (node) => {
          const d = await node.api<{ id: string }>(node.r.lb.url, 'POST', '/domains', { name: 'console-lb' });
          domainId = d.body.id;
          ttyAgent = await node.enrol(domainId, 'tty');
          writeFileSync(
            join(node.home, 'svcd', 'agents.toml'),
            `[[agent]]\nid = "${ttyAgent}"\nruntime = "alpha_code"\nsupervise = true\npty = true\ncommand = ["node", ${JSON.stringify(SVCD_BIN)}, "reference-agent", "--interactive"]\n`,
          );
        },
      });
      await waitFor('the agent running', async () => {
        const list = await mgmtCall<{ items: { id: string; state: string }[] }>(n.mgmtSock, 'agent.list');
        return list.items.some((a) => a.id === ttyAgent && a.state === 'running');
      });
      browser = await launchBrowser();
    }, 300_000);
    afterAll(async () => {
      await browser?.close();
      await n?.stop();
    });

    it('through the balancer: shows the node online, restarts its agent and opens its terminal, served by both replicas', async () => {
      const before = await n.r.lb.servers();
      await nodePageRestartAndTerminal(n.r.lb.url, 'through the balancer');
      const after = await n.r.lb.servers();
      // Round-robin: the page's requests reached both replicas, the node's holder and the other.
      expect(after.map((s, i) => s.total > (before[i]?.total ?? 0))).toEqual([true, true]);
    }, 180_000);

    it('at the replica without the node: shows it online, restarts its agent and opens its terminal through the other', async () => {
      const { holder, other } = await otherReplica();
      await nodePageRestartAndTerminal(n.r.towers[other]?.url as string, 'through the other replica');
      // Nothing moved: the node's channel stayed where it was, and every answer came through it.
      expect(await n.holderIndex()).toBe(holder);
    }, 180_000);

    it('through the balancer: the feed shows live the events written on either replica', async () => {
      const page = await signedIn(n.r.lb.url);
      const errors = collectPageErrors(page);
      await page.getByRole('link', { name: 'Feed' }).click();
      await expect.poll(() => page.getByTestId('feed-state').textContent()).toBe('live');
      const feed = page.getByTestId('feed');
      // Written on each replica directly, then through the balancer (which alternates).
      for (const [i, t] of n.r.towers.entries()) {
        const a = await n.api(t.url, 'POST', '/approvals', {
          domain_id: domainId,
          title: `written on r${i}`,
        });
        expect(a.status).toBe(201);
        await feed.getByText(`written on r${i}`).first().waitFor();
      }
      for (let i = 0; i < 4; i++) {
        const a = await n.api(n.r.lb.url, 'POST', '/approvals', {
          domain_id: domainId,
          title: `via lb ${i}`,
        });
        expect(a.status).toBe(201);
      }
      for (let i = 0; i < 4; i++) await feed.getByText(`via lb ${i}`).first().waitFor();
      expect(await page.getByTestId('feed-state').textContent()).toBe('live');
      expect(errors).toEqual([]);
      await page.close();
    }, 120_000);
  },
);
