// `svc logs` against real files: an agent's output log as a real svcd writes and rotates it
// (found through mgmt.sock), followed with -f across rotations with no line lost or repeated
// and stopped with Ctrl-C; the tower's pino lines shown with readable times, or as they are
// with --json.
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mgmtCall } from '../../src/cli/mgmt-client.js';
import type { AgentStatus } from '../../src/protocol/agents.js';
import { waitFor } from '../support/poll.js';
import {
  isolatedEnv,
  type Proc,
  run,
  SVC_BIN,
  SVCD_BIN,
  spawnProc,
  startTowerProc,
  stopAll,
} from '../support/procs.js';
import { makeTempDir } from '../support/tmp.js';

const tmp = makeTempDir('svc-e2e-logs-');
const env: NodeJS.ProcessEnv = { ...isolatedEnv(tmp.dir), TZ: 'UTC' };
const home = env.SVC_HOME as string;
const mgmtSock = join(home, 'svcd', 'mgmt.sock');
let svcd: Proc;

beforeAll(async () => {
  mkdirSync(join(home, 'svcd'), { recursive: true, mode: 0o700 });
  mkdirSync(env.HOME as string, { recursive: true });
  // svcd needs an identity, not a tower: the agents' logs are svcd's own business.
  writeFileSync(
    join(home, 'node.json'),
    JSON.stringify({ node_id: 'node_e2e', hostname: 'e2e', backend_url: 'http://127.0.0.1:1', jwt: 'x.y.z' }),
    { mode: 0o600 },
  );
  // The smallest rotation svcd allows, so the agent below rotates its log every second or so;
  // 20 files kept, so a follower starved of CPU for a while still finds every rotated line.
  writeFileSync(join(home, 'svcd', 'config.toml'), '[supervisor]\nlog_max_bytes = 4096\nlog_keep = 20\n');
  writeFileSync(
    join(home, 'svcd', 'agents.toml'),
    `[[agent]]
id = "talker"
runtime = "alpha_code"
profile = "chatty"
supervise = true
command = ["sh", "-c", "i=0; while :; do i=$((i+1)); echo \\"line $i $(printf '%080d' 0)\\"; sleep 0.02; done"]
`,
  );
  svcd = spawnProc(SVCD_BIN, ['run', '--backend-url', 'http://127.0.0.1:1'], env);
  await waitFor(
    'svcd running the agent',
    async () => {
      const code = await Promise.race([svcd.exited, Promise.resolve(null)]);
      if (code !== null) throw new Error(`svcd exited (${code}): ${svcd.stderr()}`);
      return (await mgmtCall<AgentStatus>(mgmtSock, 'agent.status', { id: 'talker' })).state === 'running';
    },
    { timeoutMs: 90_000 },
  );
});

afterAll(async () => {
  await stopAll();
  tmp.remove();
});

/** The numbers of the agent's "line N …" lines in `text`, in order. */
const numbers = (text: string): number[] =>
  [...text.matchAll(/^line (\d+) 0{80}$/gm)].map((m) => Number(m[1]));

describe('svc logs', () => {
  it("follows an agent's log, found through svcd, across rotations without losing or repeating a line", async () => {
    const status = await mgmtCall<AgentStatus>(mgmtSock, 'agent.status', { id: 'talker' });
    expect(status.log_file).toBe(join(home, 'svcd', 'logs', 'talker.log'));
    // By profile, as every svc agent command accepts.
    const logs = spawnProc(SVC_BIN, ['logs', 'chatty', '-f', '-n', '5'], env);
    await waitFor('the first lines', () => numbers(logs.stdout()).length >= 5);
    const first = numbers(logs.stdout())[0] as number;
    // 4096-byte files and ~90-byte lines: 150 lines span at least three rotations.
    await waitFor('lines across rotations', () => numbers(logs.stdout()).length >= 150, {
      timeoutMs: 120_000,
    });
    logs.kill('SIGINT');
    expect(await logs.exited).toBe(0);
    expect(logs.stderr()).toBe('');
    const seen = numbers(logs.stdout());
    expect(seen).toEqual(Array.from({ length: seen.length }, (_, i) => first + i));
    // Other lines of the log are svcd's marks (the agent's start).
    const others = logs
      .stdout()
      .split('\n')
      .filter((l) => l !== '' && !/^line \d+ /.test(l));
    for (const l of others) expect(l).toMatch(/^--- \d{4}-\d\d-\d\dT[\d:.]+Z /);
  });

  it("shows the tower's pino lines with a readable time, or as they are with --json", async () => {
    mkdirSync(join(home, 'logs'), { recursive: true });
    const t = Date.UTC(2026, 4, 3, 17, 29, 38, 123);
    const pino = [
      { level: 30, time: t, name: 'tower', msg: 'svc tower listening', url: 'http://127.0.0.1:8008' },
      {
        level: 40,
        time: t + 1000,
        name: 'tower',
        component: 'store',
        msg: 'writes failing',
        code: 'SQLITE_FULL',
      },
    ].map((o) => JSON.stringify(o));
    writeFileSync(join(home, 'logs', 'tower.log'), `${pino.join('\n')}\nnot json\n`);
    const pretty = await run(SVC_BIN, ['logs', 'tower'], env);
    expect(pretty).toEqual({
      code: 0,
      stdout: [
        '2026-05-03 17:29:38.123 INFO  tower: svc tower listening url=http://127.0.0.1:8008',
        '2026-05-03 17:29:39.123 WARN  tower store: writes failing code=SQLITE_FULL',
        'not json',
        '',
      ].join('\n'),
      stderr: '',
    });
    const json = await run(SVC_BIN, ['--json', 'logs', 'tower', '-n', '2'], env);
    expect(json.code).toBe(0);
    expect(json.stdout).toBe(`${pino[1]}\n${JSON.stringify({ line: 'not json' })}\n`);
    const since = await run(SVC_BIN, ['logs', 'tower', '--since', '2026-05-03T17:29:39Z'], env);
    expect(since.stdout.split('\n')[0]).toBe(
      '2026-05-03 17:29:39.123 WARN  tower store: writes failing code=SQLITE_FULL',
    );
  });

  it('follows the log a tower writes and rotates itself (--log-file), each file of whole JSON lines', async () => {
    const home2 = join(tmp.dir, 'tower-home');
    const file = join(home2, 'logs', 'tower.log');
    mkdirSync(join(home2, 'logs'), { recursive: true });
    // Nearly full (34 lines of 117 bytes, 3978): the tower's first line takes it past 4096.
    const t = Date.UTC(2026, 0, 1);
    const old = Array.from({ length: 34 }, (_, i) =>
      JSON.stringify({
        level: 30,
        time: t + i,
        name: 'tower',
        msg: `earlier ${String(i).padStart(2, '0')}`,
        pad: 'x'.repeat(40),
      }),
    );
    writeFileSync(file, `${old.join('\n')}\n`);
    const towerEnv = { ...env, SVC_HOME: home2 };
    const logs = spawnProc(SVC_BIN, ['logs', 'tower', '-f', '-n', '1', '--utc'], towerEnv);
    await waitFor('the last earlier line', () => logs.stdout().includes('tower: earlier 33'));
    // (startTowerProc asks for warn; the last --log-level wins)
    await startTowerProc(towerEnv, [
      '--log-level',
      'info',
      '--log-file',
      file,
      '--log-max-bytes',
      '4096',
      '--log-keep',
      '2',
    ]);
    await waitFor("the tower's lines after the rotation", () =>
      /INFO {2}tower http: Server listening at /.test(logs.stdout()),
    );
    logs.kill('SIGINT');
    expect(await logs.exited).toBe(0);
    const shown = logs.stdout().split('\n');
    expect(shown[0]).toBe(
      '2026-01-01 00:00:00.033Z INFO  tower: earlier 33 pad=xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx',
    );
    expect(shown.indexOf(shown.find((l) => l.includes('tower: store migrated')) ?? '')).toBeGreaterThan(0);
    // Rotated: the earlier lines went to .1 with whatever fitted; every line is whole JSON.
    const rotated = readFileSync(`${file}.1`, 'utf8');
    expect(rotated.startsWith(`${old[0]}\n`)).toBe(true);
    for (const text of [rotated, readFileSync(file, 'utf8')]) {
      expect(Buffer.byteLength(text)).toBeLessThanOrEqual(4096);
      for (const line of text.trimEnd().split('\n')) expect(() => JSON.parse(line), line).not.toThrow();
    }
  });

  it('refuses a --since it cannot read as a usage error', async () => {
    const r = await run(SVC_BIN, ['--json', 'logs', 'tower', '--since', 'yesterday'], env);
    expect(r.code).toBe(2);
    expect(JSON.parse(r.stderr)).toMatchObject({ error: { code: 'usage', exit_code: 2 } });
  });
});
