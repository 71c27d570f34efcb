// `svc up` on a fresh SVC_HOME: a tower, a registered node, svcd and a demo agent that
// answers a prompt; `svc up` again reuses them; `svc down` stops svcd (whoever started it last),
// the agents that outlive it and the tower. A start that fails says why at once.
import { spawnSync } from 'node:child_process';
import { appendFileSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { waitFor } from '../support/poll.js';
import { isolatedEnv, run, SVC_BIN } from '../support/procs.js';
import { makeTempDir } from '../support/tmp.js';

interface UpState {
  tower?: { pid: number; url: string };
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

/** A home's processes, killed whatever happened; its tmux server ended. */
function cleanUp(home: string, sockets: string[]): void {
  const pids: (number | undefined)[] = [];
  for (const f of [join(home, 'up.json'), join(home, 'svcd', 'daemon.json')]) {
    try {
      const s = JSON.parse(readFileSync(f, 'utf8')) as { tower?: { pid: number }; pid?: number };
      pids.push(s.tower?.pid, s.pid);
    } catch {}
  }
  for (const pid of pids) if (alive(pid)) process.kill(pid as number, 'SIGKILL');
  for (const s of sockets) {
    spawnSync('tmux', ['-L', s, 'kill-server']);
    // tmux leaves its socket file behind when the server is killed.
    rmSync(join(process.env.TMUX_TMPDIR ?? '/tmp', `tmux-${process.getuid?.() ?? 0}`, s), { force: true });
  }
}

describe('svc up / svc down', () => {
  const tmp = makeTempDir('svc-e2e-up-');
  const env = isolatedEnv(tmp.dir);
  const home = env.SVC_HOME as string;
  const svc = (...args: string[]) => run(SVC_BIN, args, env);
  const state = () => JSON.parse(readFileSync(join(home, 'up.json'), 'utf8')) as UpState;
  const sockets: string[] = [];

  afterAll(async () => {
    cleanUp(home, sockets);
    tmp.remove();
  });

  it('starts everything, answers a prompt, is idempotent, and stops', async () => {
    const up = await svc('--json', 'up', '--port', '0', '--hostname', 'up-e2e');
    expect(up.code, up.stderr).toBe(0);
    const summary = JSON.parse(up.stdout) as {
      console_url: string;
      admin_token_file: string;
      next: string[];
    };
    expect(summary.console_url).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/$/);
    expect(summary.admin_token_file).toBe(join(home, 'tower', 'admin.token'));
    expect(summary.next.length).toBe(3);
    const first = state();
    const svcdPid = (JSON.parse((await svc('--json', 'daemon', 'status')).stdout) as { pid: number }).pid;
    expect(alive(first.tower?.pid) && alive(svcdPid)).toBe(true);

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
    // The logs are where the docs say.
    expect(readFileSync(join(home, 'logs', 'tower.log'), 'utf8')).toMatch(/listening on/);
    expect(readFileSync(join(home, 'logs', 'svcd.log'), 'utf8')).toMatch(/svcd running/);

    // The doctor passes right after svc up (operator-guide: "svc system doctor && svc daemon up").
    const doctor = await svc('--json', 'system', 'doctor');
    const report = JSON.parse(doctor.stdout) as { ok: boolean; checks: { name: string; status: string }[] };
    expect(report.checks.filter((c) => c.status === 'fail')).toEqual([]);
    expect(doctor.code).toBe(0);

    const again = await svc('up', '--port', '0', '--hostname', 'up-e2e');
    expect(again.code).toBe(0);
    expect(again.stderr).toMatch(/already running/);
    expect(state().tower?.pid).toBe(first.tower?.pid);

    const down = await svc('down');
    expect(down.code).toBe(0);
    expect(down.stdout).toMatch(/stopped svcd \(pid \d+\), tower/);
    expect(alive(first.tower?.pid) || alive(svcdPid)).toBe(false);
  });

  it('stops the svcd of a later "svc daemon up", its agents and a mux agent\'s tmux session', async () => {
    const up = await svc('--json', 'up', '--port', '0', '--hostname', 'up-e2e');
    expect(up.code, up.stderr).toBe(0);
    // A mux_hosted agent next to the demo agent: its tmux session outlives svcd by design.
    appendFileSync(join(home, 'svcd', 'agents.toml'), '\n[[agent]]\nid = "desk"\nruntime = "mux_hosted"\n');
    expect((await svc('agent', 'supervise', 'reload')).code).toBe(0);
    const desk = JSON.parse((await svc('--json', 'agent', 'supervise', 'status', 'desk')).stdout) as {
      state: string;
      tmux: { socket: string; session: string };
    };
    expect(desk).toMatchObject({ state: 'running', tmux: { session: 'desk' } });
    sockets.push(desk.tmux.socket);
    const hasDesk = () => spawnSync('tmux', ['-L', desk.tmux.socket, 'has-session', '-t', '=desk']).status;
    expect(hasDesk()).toBe(0);

    // The newcomer's sequence: restart svcd by hand, then stop everything.
    expect((await svc('daemon', 'down')).code).toBe(0);
    expect(hasDesk()).toBe(0);
    expect((await svc('daemon', 'up')).code).toBe(0);
    const restarted = (JSON.parse((await svc('--json', 'daemon', 'status')).stdout) as { pid: number }).pid;
    // svcd brings its agents up in the background (desk's tmux session is adopted).
    const agentPids = await waitFor('both agents running', async () => {
      const agents = JSON.parse((await svc('--json', 'agent', 'supervise', 'list')).stdout) as {
        items: { id: string; state: string; pid: number | null }[];
      };
      const running = agents.items.filter((a) => a.state === 'running' && a.pid !== null);
      return running.length === 2 ? running.map((a) => a.pid as number) : null;
    });

    const towerPid = state().tower?.pid;
    const down = await svc('--json', 'down');
    expect(down.code).toBe(0);
    expect(JSON.parse(down.stdout)).toEqual({
      stopped: [`svcd (pid ${restarted})`, 'agents desk', `tower (pid ${towerPid})`],
    });
    expect(alive(restarted)).toBe(false);
    expect(agentPids.filter(alive)).toEqual([]);
    expect(hasDesk()).not.toBe(0);
    expect((await svc('daemon', 'status')).code).toBe(69);
  });
});

describe('svc up that cannot start', () => {
  const tmp = makeTempDir('svc-e2e-up-fail-');
  let holder: Server | null = null;

  afterAll(async () => {
    await new Promise<void>((r) => (holder ? holder.close(() => r()) : r()));
    for (const name of ['taken', 'badconfig']) cleanUp(join(tmp.dir, name), []);
    tmp.remove();
  });

  it('reports a port in use at once, with what to do', async () => {
    const server = createServer();
    holder = server;
    const port = await new Promise<number>((r) =>
      server.listen(0, '127.0.0.1', () => r((server.address() as { port: number }).port)),
    );
    const env = isolatedEnv(tmp.dir, 'taken');
    const r = await run(SVC_BIN, ['up', '--port', String(port), '--hostname', 'taken'], env);
    expect(r.code).toBe(69);
    expect(r.stderr).toContain(`the tower cannot listen on 127.0.0.1:${port}: the port is in use.`);
    expect(r.stderr).toContain('svc down');
    expect(r.stderr).toContain('svc up --port <N>');
    expect(r.stderr).not.toMatch(/did not come up/);
  });

  it('reports svcd refusing its configuration at once, with its reason and exit code 78', async () => {
    const env = isolatedEnv(tmp.dir, 'badconfig');
    const home = env.SVC_HOME as string;
    mkdirSync(join(home, 'svcd'), { recursive: true });
    writeFileSync(join(home, 'svcd', 'config.toml'), '[no_such_table]\n');
    const r = await run(SVC_BIN, ['up', '--port', '0', '--hostname', 'badconfig'], env);
    expect(r.code).toBe(78);
    expect(r.stderr).toMatch(/svcd refused to start:[\s\S]*no_such_table/);
    expect(r.stderr).not.toMatch(/did not come up/);
  });
});
