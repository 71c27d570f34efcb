// `svc up` on a fresh SVC_HOME: a tower, a registered node, svcd and a demo agent that
// answers a prompt; `svc up` again reuses them; `svc down` stops both.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { isolatedEnv, run, SVC_BIN } from '../support/procs.js';
import { makeTempDir } from '../support/tmp.js';

interface UpState {
  tower?: { pid: number; url: string };
  svcd?: { pid: number };
}

const alive = (pid: number | undefined) => {
  if (!pid) return false;
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

describe('svc up / svc down', () => {
  const tmp = makeTempDir('svc-e2e-up-');
  const env = isolatedEnv(tmp.dir);
  const svc = (...args: string[]) => run(SVC_BIN, args, env);
  const state = () => JSON.parse(readFileSync(join(tmp.dir, 'home', 'up.json'), 'utf8')) as UpState;

  afterAll(async () => {
    // Whatever happened, leave nothing running.
    try {
      const s = state();
      for (const pid of [s.svcd?.pid, s.tower?.pid]) if (alive(pid)) process.kill(pid as number, 'SIGKILL');
    } catch {}
    tmp.remove();
  });

  it('starts everything, answers a prompt, is idempotent, and stops', async () => {
    const up = await svc('--json', 'up', '--port', '0', '--hostname', 'up-e2e');
    expect(up.code).toBe(0);
    const summary = JSON.parse(up.stdout) as {
      console_url: string;
      admin_token_file: string;
      next: string[];
    };
    expect(summary.console_url).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/$/);
    expect(summary.next.length).toBe(3);
    const first = state();
    expect(alive(first.tower?.pid) && alive(first.svcd?.pid)).toBe(true);

    const status = JSON.parse((await svc('--json', 'daemon', 'status')).stdout) as {
      tower: { connected: boolean };
    };
    expect(status.tower.connected).toBe(true);
    const signal = await svc('--json', 'agent', 'signal', 'demo', '--prompt', 'progress: 1', '--wait');
    expect(signal.code).toBe(0);
    expect(JSON.parse(signal.stdout)).toMatchObject({ ok: true, summary: 'made 1 progress steps' });
    // The CLI now talks to this tower without flags.
    const feed = await svc('feed', '--since', '0', '--type', 'progress', '--limit', '1');
    expect(feed.stdout).toMatch(/progress/);

    const again = await svc('up', '--port', '0', '--hostname', 'up-e2e');
    expect(again.code).toBe(0);
    expect(again.stderr).toMatch(/already running/);
    expect(state().tower?.pid).toBe(first.tower?.pid);
    expect(state().svcd?.pid).toBe(first.svcd?.pid);

    const down = await svc('down');
    expect(down.code).toBe(0);
    expect(down.stdout).toMatch(/stopped svcd .* and tower/);
    expect(alive(first.tower?.pid) || alive(first.svcd?.pid)).toBe(false);
  });
});
