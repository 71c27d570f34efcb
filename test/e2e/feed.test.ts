// The feed end to end: `svc feed` following a real tower (also through a kill -9 and restart
// of the tower mid-burst), curl -N as a client we did not write, approvals and inbox through
// the CLI.
import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { waitFor } from '../support/poll.js';
import { run, SVC_BIN, spawnProc, startTowerProc, stopAll, type TowerProc } from '../support/procs.js';
import { makeTempDir } from '../support/tmp.js';

async function api(url: string, token: string, method: string, path: string, body?: unknown) {
  const res = await fetch(url + path, {
    method,
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
  });
  const text = await res.text();
  return { status: res.status, body: text ? (JSON.parse(text) as Record<string, unknown>) : {} };
}

describe('the feed with real processes', () => {
  let tmp: ReturnType<typeof makeTempDir>;
  let env: NodeJS.ProcessEnv;
  let tower: TowerProc;
  let admin: string;

  beforeAll(async () => {
    tmp = makeTempDir('svc-feed-');
    env = { SVC_HOME: tmp.dir, SVC_TOKEN: '', SVC_BASE_URL: '' };
    tower = await startTowerProc(env);
    env.SVC_BASE_URL = tower.url;
    admin = readFileSync(join(tmp.dir, 'tower', 'admin.token'), 'utf8').trim();
    env.SVC_TOKEN = admin;
  });
  afterAll(async () => {
    await stopAll();
    tmp.remove();
  });

  it('svc feed prints live events; curl -N reads the same stream', async () => {
    const follow = spawnProc(SVC_BIN, ['--json', 'feed', '--type', 'matrix', '--limit', '2'], env);
    const curl = execFile('curl', [
      '-sN',
      '-H',
      `Authorization: Bearer ${admin}`,
      `${tower.url}/events/stream`,
    ]);
    let curlOut = '';
    curl.stdout?.on('data', (d: Buffer) => {
      curlOut += d.toString();
    });
    // Both clients are connected once the stream sent its first bytes (retry: …).
    await waitFor('curl to connect', () => curlOut.includes('retry:'));
    const created = await run(SVC_BIN, ['--json', 'domain', 'create', 'feed-e2e'], env);
    const d = JSON.parse(created.stdout) as { id: string };
    // svc feed may connect after the first event: keep producing until it has two.
    let n = 0;
    await waitFor('svc feed to print two events', async () => {
      if (follow.stdout().trim().split('\n').filter(Boolean).length >= 2) return true;
      await api(tower.url, admin, 'POST', `/domains/${d.id}/m`, { name: `m${n++}` });
      return false;
    });
    expect(await follow.exited).toBe(0);
    const lines = follow
      .stdout()
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { id: string; type: string });
    expect(lines.every((e) => e.type === 'matrix')).toBe(true);
    await waitFor('curl to see the domain event', () => curlOut.includes(`"domain_id":"${d.id}"`));
    expect(curlOut).toMatch(/^id: \d+$/m);
    curl.kill();
  });

  it('approvals and inbox through the CLI; deciding twice exits with the conflict code', async () => {
    const d = JSON.parse((await run(SVC_BIN, ['--json', 'domain', 'create', 'apr-e2e'], env)).stdout) as {
      id: string;
    };
    const a = await api(tower.url, admin, 'POST', '/approvals', { domain_id: d.id, title: 'ship it?' });
    const listed = await run(SVC_BIN, ['approvals', 'list', '--status', 'pending'], env);
    expect(listed.stdout).toContain('ship it?');
    const ok = await run(
      SVC_BIN,
      ['--json', 'approvals', 'approve', a.body.id as string, '--reason', 'go'],
      env,
    );
    expect(ok.code).toBe(0);
    expect(JSON.parse(ok.stdout)).toMatchObject({ status: 'approved', reason: 'go' });
    const again = await run(SVC_BIN, ['approvals', 'reject', a.body.id as string], env);
    expect(again.code).not.toBe(0);
    expect(again.stderr).toMatch(/already/);
    const sent = await run(SVC_BIN, ['inbox', 'send', 'agent-1', 'hello there', '--domain', d.id], env);
    expect(sent.code).toBe(0);
    const inbox = await run(SVC_BIN, ['inbox', 'list', '--agent', 'agent-1'], env);
    expect(inbox.stdout).toContain('hello there');
    const feed = await run(SVC_BIN, ['feed', '--since', '0', '--domain', d.id, '--limit', '4'], env);
    expect(feed.stdout).toMatch(/approval .*requested "ship it\?"/);
    expect(feed.stdout).toMatch(/inbox .*to agent-1: hello there/);
  });

  it('loses and doubles nothing across kill -9 and restart of the tower during a burst', async () => {
    const home = makeTempDir('svc-feed-kill-');
    const kenv: NodeJS.ProcessEnv = { SVC_HOME: home.dir, SVC_TOKEN: '', SVC_BASE_URL: '' };
    let t = await startTowerProc(kenv);
    const port = new URL(t.url).port;
    const token = readFileSync(join(home.dir, 'tower', 'admin.token'), 'utf8').trim();
    const node = await api(t.url, token, 'POST', '/nodes', { hostname: 'burst-node' });
    const jwt = node.body.jwt as string;
    const TOTAL = 10_000;
    const BATCH = 250;
    const follower = spawnProc(
      SVC_BIN,
      ['--json', 'feed', '--type', 'progress', '--since', '0', '--limit', String(TOTAL)],
      { ...kenv, SVC_BASE_URL: t.url, SVC_TOKEN: token },
    );
    let killed = false;
    for (let start = 0; start < TOTAL; start += BATCH) {
      const events = Array.from({ length: BATCH }, (_, i) => ({
        key: `n${start + i}`,
        type: 'progress',
        agent_id: 'burst',
        payload: { n: start + i },
      }));
      // Like svcd's outbox: retry a batch until the tower took it (keys make retries safe).
      await waitFor(
        `batch ${start}`,
        async () =>
          (await api(`http://127.0.0.1:${port}`, jwt, 'POST', '/nodes/events', { events })).status === 202,
        { timeoutMs: 90_000, intervalMs: 50 },
      );
      if (!killed && start >= TOTAL / 2) {
        killed = true;
        t.kill('SIGKILL');
        await t.exited;
        t = await startTowerProc(kenv, ['--listen', `127.0.0.1:${port}`]);
      }
    }
    expect(await follower.exited).toBe(0);
    const ns = follower
      .stdout()
      .trim()
      .split('\n')
      .map((l) => (JSON.parse(l) as { payload: { n: number } }).payload.n);
    expect(ns.length).toBe(TOTAL);
    expect(ns).toEqual(Array.from({ length: TOTAL }, (_, i) => i));
    expect(follower.stderr()).toMatch(/reconnecting/);
    t.kill('SIGTERM');
    await t.exited;
    home.remove();
  });
});
