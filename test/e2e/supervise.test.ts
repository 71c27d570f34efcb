// Agent lifecycle through a real `svcd run` and the `svc` CLI: the watchdog restarts a
// kill -9ed agent (poll 1 s), pause/resume, signal to ACP and tmux agents, ACP progress in
// the event outbox bound for the tower feed, a tmux agent surviving a svcd restart, and a bad
// agents.toml refused on reload with running agents untouched.

import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mgmtCall } from '../../src/cli/mgmt-client.js';
import type { AgentStatus, SignalResult } from '../../src/protocol/agents.js';
import { waitFor } from '../support/poll.js';
import { isolatedEnv } from '../support/procs.js';
import { psGroup } from '../support/ps.js';
import { makeTempDir } from '../support/tmp.js';

const ROOT = resolve(import.meta.dirname, '../..');
const SVC = join(ROOT, 'dist/cli/svc.js');
const SVCD = join(ROOT, 'dist/cli/svcd.js');
const TMUX_SOCKET = `svc-e2e-${process.pid}-${Math.random().toString(36).slice(2, 8)}`;

const tmp = makeTempDir('svc-e2e-supervise-');
const home = join(tmp.dir, 'svc-home');
const env = isolatedEnv(tmp.dir, 'svc-home');

let svcd: ChildProcess | null = null;
let svcdLog = '';

function svc(...args: string[]): { code: number | null; stdout: string; stderr: string } {
  const r = spawnSync(process.execPath, [SVC, ...args], { env, encoding: 'utf8' });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

function svcJson<T>(...args: string[]): T {
  const r = svc('--json', ...args);
  if (r.code !== 0) throw new Error(`svc ${args.join(' ')} failed (${r.code}): ${r.stderr}`);
  return JSON.parse(r.stdout) as T;
}

// Polling goes straight to mgmt.sock (what every svc agent command calls); the CLI itself is
// exercised where the test is about it.
const mgmtSock = join(home, 'svcd', 'mgmt.sock');
const list = async () => (await mgmtCall<{ items: AgentStatus[] }>(mgmtSock, 'agent.list')).items;
const agent = (id: string) => mgmtCall<AgentStatus>(mgmtSock, 'agent.status', { id });
const tmux = (...args: string[]) => spawnSync('tmux', ['-L', TMUX_SOCKET, ...args], { encoding: 'utf8' });

async function startSvcd(): Promise<void> {
  svcdLog = '';
  const p = spawn(process.execPath, [SVCD, 'run', '--backend-url', 'http://127.0.0.1:1'], {
    env,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  p.stdout?.on('data', (c: Buffer) => {
    svcdLog += c.toString();
  });
  p.stderr?.on('data', (c: Buffer) => {
    svcdLog += c.toString();
  });
  svcd = p;
  await waitFor(
    'svcd and its agents',
    async () => {
      if (p.exitCode !== null) throw new Error(`svcd exited: ${svcdLog}`);
      const items = await list();
      return items.length === 3 && items.every((a) => a.state === 'running');
    },
    { timeoutMs: 90_000 },
  );
}

async function stopSvcd(): Promise<void> {
  const p = svcd;
  svcd = null;
  if (!p || p.exitCode !== null) return;
  const exited = new Promise((r) => p.once('exit', r));
  p.kill('SIGTERM');
  await exited;
}

beforeAll(async () => {
  mkdirSync(join(home, 'svcd'), { recursive: true, mode: 0o700 });
  mkdirSync(env.HOME as string, { recursive: true });
  writeFileSync(
    join(home, 'node.json'),
    JSON.stringify({ node_id: 'node_e2e', hostname: 'e2e', backend_url: 'http://127.0.0.1:1', jwt: 'x.y.z' }),
    { mode: 0o600 },
  );
  writeFileSync(
    join(home, 'svcd', 'config.toml'),
    `[watchdog]\npoll = "1s"\ngrace = "2s"\n\n[supervisor]\ntmux_socket = "${TMUX_SOCKET}"\nstop_grace = "3s"\n`,
  );
  writeFileSync(
    join(home, 'svcd', 'agents.toml'),
    `[[agent]]
id = "sleeper"
runtime = "alpha_code"
supervise = true
command = ["sh", "-c", "sleep 600 & sleep 600 & wait"]

[[agent]]
id = "reviewer"
runtime = "alpha_agent_acp"
profile = "review"

[[agent]]
id = "pane"
runtime = "mux_hosted"
`,
  );
  await startSvcd();
});

afterAll(async () => {
  await stopSvcd();
  tmux('kill-server');
  // tmux leaves its socket file behind when the server is killed.
  rmSync(join(process.env.TMUX_TMPDIR ?? '/tmp', `tmux-${process.getuid?.() ?? 0}`, TMUX_SOCKET), {
    force: true,
  });
  tmp.remove();
});

describe('svcd supervising agents', () => {
  it('lists the agents of agents.toml running on their backends', async () => {
    expect((await list()).map((a) => [a.id, a.runtime, a.backend, a.state])).toEqual([
      ['pane', 'mux_hosted', 'tmux', 'running'],
      ['reviewer', 'alpha_agent_acp', 'process', 'running'],
      ['sleeper', 'alpha_code', 'process', 'running'],
    ]);
    const human = svc('agent', 'supervise', 'list');
    expect(human.code).toBe(0);
    expect(human.stdout.split('\n')[0]).toMatch(/^ID\s+RUNTIME\s+BACKEND\s+STATE\s+PID\s+RESTARTS/);
  });

  it('restarts a kill -9ed agent at the next poll and leaves none of its old group', async () => {
    const before = await agent('sleeper');
    const pid = before.pid as number;
    await waitFor('the grandchildren', () => psGroup(pid).length === 3);
    process.kill(pid, 'SIGKILL');
    const after = await waitFor('the restart', async () => {
      const s = await agent('sleeper');
      return s.restarts === 1 && s.state === 'running' ? s : null;
    });
    expect(after.pid).not.toBe(pid);
    expect(after.last_restart_reason).toBe('dead');
    expect(after.history?.map((h) => h.action)).toEqual(['restart']);
    expect(psGroup(pid)).toEqual([]);
  });

  it('does not restart a paused agent and restarts it after resume', async () => {
    expect(svc('agent', 'supervise', 'pause', 'sleeper').stdout).toMatch(
      /^sleeper: running \(paused\), pid \d+/,
    );
    const pid = (await agent('sleeper')).pid as number;
    process.kill(pid, 'SIGKILL');
    const dead = await waitFor('the death', async () => {
      const s = await agent('sleeper');
      return s.state === 'dead' ? s : null;
    });
    // Two more polls see it dead and paused, and leave it so.
    const seen = Date.parse(dead.checked_at as string);
    await waitFor(
      'two polls',
      async () => Date.parse((await agent('sleeper')).checked_at as string) >= seen + 2000,
    );
    expect(await agent('sleeper')).toMatchObject({ state: 'dead', paused: true, restarts: 1 });
    expect(svc('agent', 'supervise', 'resume', 'sleeper').code).toBe(0);
    await waitFor('the restart after resume', async () => (await agent('sleeper')).restarts === 2);
    expect(await agent('sleeper')).toMatchObject({ state: 'running', paused: false });
  });

  it('prompts an ACP agent by profile and records its progress for the tower feed', () => {
    const r = svcJson<SignalResult>(
      'agent',
      'signal',
      'review',
      '--prompt',
      'progress: 1\nrun: echo e2e-ok',
      '--wait',
    );
    expect(r).toMatchObject({
      agent_id: 'reviewer',
      delivery: 'acp_prompt',
      done: true,
      ok: true,
      stop_reason: 'end_turn',
    });
    expect(r.summary).toBe('made 1 progress steps\ne2e-ok');
    const failed = svc('agent', 'signal', 'reviewer', '--prompt', 'fail: not today', '--wait');
    expect(failed.code).toBe(1);
    expect(failed.stdout).toMatch(/^reviewer: acp_prompt prm_\S+ failed: agent error: not today/);

    // No tower answers in this test, so the events wait in svcd's durable outbox.
    const db = new Database(join(home, 'svcd', 'state.db'), { readonly: true });
    try {
      const rows = db.prepare('select event from outbox order by seq').all() as { event: string }[];
      const progress = rows
        .map(
          (row) =>
            JSON.parse(row.event) as { type: string; agent_id: string; payload: Record<string, unknown> },
        )
        .filter((e) => e.type === 'progress' && e.payload.run_id === r.run_id);
      expect(progress.map((e) => [e.agent_id, e.payload.kind, e.payload.text])).toEqual([
        ['reviewer', 'thought', 'step 1 of 1\n'],
        ['reviewer', 'message', 'made 1 progress steps\n'],
        ['reviewer', 'tool_call', 'run: echo e2e-ok'],
        ['reviewer', 'tool_call_update', 'e2e-ok\n'],
        ['reviewer', 'message', 'e2e-ok\n'],
      ]);
      const restarts = rows
        .map((row) => JSON.parse(row.event) as { type: string; payload: Record<string, unknown> })
        .filter((e) => e.type === 'matrix')
        .map((e) => [e.payload.event, e.payload.agent_id, e.payload.reason]);
      expect(restarts).toEqual([
        ['agent.restarted', 'sleeper', 'dead'],
        ['agent.restarted', 'sleeper', 'dead'],
      ]);
    } finally {
      db.close();
    }
  });

  it('types a signal into the tmux pane and keeps the pane across a svcd restart', async () => {
    const pane = await agent('pane');
    await waitFor('the pane agent', () =>
      tmux('capture-pane', '-p', '-t', '=pane:').stdout.includes('reference agent ready'),
    );
    expect(svc('agent', 'signal', 'pane', '--prompt', 'first hello').stdout).toBe('pane: send_keys ok\n');
    await waitFor('the first answer', () =>
      tmux('capture-pane', '-p', '-t', '=pane:').stdout.includes('echo: first hello'),
    );

    const sleeperPid = (await agent('sleeper')).pid as number;
    await stopSvcd();
    expect(psGroup(sleeperPid)).toEqual([]); // svcd's own children end with it
    expect(psGroup(pane.pid as number).length).toBeGreaterThan(0); // the pane lives on
    await startSvcd();
    const adopted = await agent('pane');
    expect(adopted).toMatchObject({ state: 'running', pid: pane.pid });
    expect(adopted.history?.map((h) => h.action)).toEqual(['adopted']);
    svc('agent', 'signal', 'pane', '--prompt', 'second hello');
    await waitFor('the second answer', () =>
      tmux('capture-pane', '-p', '-t', '=pane:').stdout.includes('echo: second hello'),
    );
  });

  it('refuses a bad agents.toml on reload, naming file and line, and leaves agents running', async () => {
    const before = (await list()).map((a) => [a.id, a.pid]);
    const file = join(home, 'svcd', 'agents.toml');
    writeFileSync(
      file,
      '[[agent]]\nid = "a"\nruntime = "alpha_code"\n\n[[agent]]\nid = "a"\nruntime = "beta_cli"\n',
    );
    const r = svc('agent', 'supervise', 'reload');
    expect(r.code).toBe(78);
    expect(r.stderr).toBe(
      `svc: error: ${file}:6: agent[1].id: duplicate id "a" (first defined on line 2) [config_invalid]\n`,
    );
    expect((await list()).map((a) => [a.id, a.pid])).toEqual(before);
  });
});
