// An ACP reference agent supervised by a real svcd: its progress reaches the tower's feed
// (svcd outbox → POST /nodes/events → /events/stream), read back with `svc feed`.
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { waitFor } from '../support/poll.js';
import {
  isolatedEnv,
  run,
  SVC_BIN,
  SVCD_BIN,
  spawnProc,
  startTowerProc,
  stopAll,
  type TowerProc,
} from '../support/procs.js';
import { makeTempDir } from '../support/tmp.js';

describe('ACP progress on the tower feed', () => {
  const tmp = makeTempDir('svc-e2e-progress-');
  const home = join(tmp.dir, 'home');
  const env = isolatedEnv(tmp.dir);
  let tower: TowerProc;
  let cli: NodeJS.ProcessEnv;

  const svc = async (args: string[]) => {
    const r = await run(SVC_BIN, args, cli);
    if (r.code !== 0) throw new Error(`svc ${args.join(' ')} failed (${r.code}): ${r.stderr}`);
    return r.stdout;
  };

  beforeAll(async () => {
    for (const d of [home, env.HOME as string]) mkdirSync(d, { recursive: true, mode: 0o700 });
    tower = await startTowerProc(env);
    cli = { ...env, SVC_BASE_URL: tower.url };
    await svc(['agent', 'node', 'register', '--hostname', 'progress-node']);
    mkdirSync(join(home, 'svcd'), { recursive: true, mode: 0o700 });
    writeFileSync(
      join(home, 'svcd', 'agents.toml'),
      '[[agent]]\nid = "reviewer"\nruntime = "alpha_agent_acp"\nprofile = "review"\n',
    );
    const svcd = spawnProc(SVCD_BIN, ['run', '--backend-url', tower.url], env);
    await waitFor(
      'the agent to run',
      async () => {
        if (svcd.child.exitCode !== null) throw new Error(`svcd exited: ${svcd.stderr()}`);
        const r = await run(SVC_BIN, ['--json', 'agent', 'supervise', 'status', 'reviewer'], cli);
        return r.code === 0 && (JSON.parse(r.stdout) as { state: string }).state === 'running';
      },
      { timeoutMs: 90_000 },
    );
  });
  afterAll(async () => {
    await stopAll();
    tmp.remove();
  });

  it('streams the steps of a prompt as progress events of the node', async () => {
    const signal = JSON.parse(
      await svc([
        '--json',
        'agent',
        'signal',
        'review',
        '--prompt',
        'progress: 1\nrun: echo feed-ok',
        '--wait',
      ]),
    ) as { run_id: string; ok: boolean };
    expect(signal.ok).toBe(true);
    const node = JSON.parse(readFileSync(join(home, 'node.json'), 'utf8')) as { node_id: string };
    const feed = await svc(['--json', 'feed', '--since', '0', '--type', 'progress', '--limit', '5']);
    const events = feed
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { agent_id: string; payload: Record<string, unknown> })
      .filter((e) => e.payload.run_id === signal.run_id);
    expect(events.map((e) => [e.agent_id, e.payload.kind])).toEqual([
      ['reviewer', 'thought'],
      ['reviewer', 'message'],
      ['reviewer', 'tool_call'],
      ['reviewer', 'tool_call_update'],
      ['reviewer', 'message'],
    ]);
    expect(events.every((e) => e.payload.node_id === node.node_id)).toBe(true);
    expect(events.at(-1)?.payload.text).toBe('feed-ok\n');
  });
});
