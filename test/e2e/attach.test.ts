// `svc attach` end to end: a tower, a registered node, svcd supervising a reference agent in
// a PTY, and `svc attach` driven inside tmux (send-keys, capture-pane): typed input reaches
// the agent, output comes back, a resize reaches the PTY, the detach key restores the shell's
// terminal.
import { spawnSync } from 'node:child_process';
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { waitFor } from '../support/poll.js';
import {
  type Proc,
  run,
  SVC_BIN,
  SVCD_BIN,
  spawnProc,
  startTowerProc,
  stopAll,
  type TowerProc,
} from '../support/procs.js';
import { makeTempDir } from '../support/tmp.js';

const TMUX_SOCKET = `svc-e2e-attach-${process.pid}-${Math.random().toString(36).slice(2, 8)}`;
const tmp = makeTempDir('svc-e2e-attach-');
const home = join(tmp.dir, 'home');
const env: NodeJS.ProcessEnv = {};
for (const [k, v] of Object.entries(process.env)) {
  if (
    k.startsWith('SVC_') ||
    k.startsWith('XDG_') ||
    k === 'DBUS_SESSION_BUS_ADDRESS' ||
    k.startsWith('TMUX')
  )
    continue;
  env[k] = v;
}
Object.assign(env, { HOME: join(tmp.dir, 'user'), SVC_HOME: home, SVC_NODE_FILE: join(home, 'node.json') });

let tower: TowerProc;
let svcd: Proc;
let cli: NodeJS.ProcessEnv;
let agentId: string;
let domainId: string;

const tmux = (...args: string[]) =>
  spawnSync('tmux', ['-L', TMUX_SOCKET, ...args], {
    encoding: 'utf8',
    env: { ...cli, TERM: 'xterm-256color' },
  });
const pane = (target: string) => tmux('capture-pane', '-p', '-J', '-S', '-200', '-t', target).stdout;
const sendLine = (target: string, text: string) => {
  tmux('send-keys', '-t', target, '-l', text);
  tmux('send-keys', '-t', target, 'Enter');
};

async function svc(args: string[], input?: string): Promise<string> {
  const r = await run(SVC_BIN, args, cli, input);
  if (r.code !== 0) throw new Error(`svc ${args.join(' ')} failed (${r.code}): ${r.stderr}`);
  return r.stdout;
}

function startSvcd(): Proc {
  const p = spawnProc(SVCD_BIN, ['run', '--backend-url', tower.url, '--log-level', 'warn'], env);
  return p;
}

async function agentRunning(): Promise<void> {
  await waitFor(
    'the PTY agent to run',
    async () => {
      if (svcd.child.exitCode !== null) throw new Error(`svcd exited: ${svcd.stderr()}`);
      const r = await run(SVC_BIN, ['--json', 'agent', 'supervise', 'list'], cli);
      if (r.code !== 0) return false;
      const items = (JSON.parse(r.stdout) as { items: { id: string; state: string }[] }).items;
      return items.some((a) => a.id === agentId && a.state === 'running');
    },
    { timeoutMs: 60_000 },
  );
}

beforeAll(async () => {
  for (const d of [home, env.HOME as string, join(home, 'svcd')])
    mkdirSync(d, { recursive: true, mode: 0o700 });
  tower = await startTowerProc(env);
  cli = { ...env, SVC_BASE_URL: tower.url };
  domainId = (JSON.parse(await svc(['--json', 'domain', 'create', 'ops'])) as { id: string }).id;
  await svc(['agent', 'node', 'register', '--hostname', 'attach-node']);
  const node = JSON.parse(readFileSync(env.SVC_NODE_FILE as string, 'utf8')) as { jwt: string };
  const enrolled = await fetch(`${tower.url}/agents`, {
    method: 'POST',
    headers: { authorization: `Bearer ${node.jwt}`, 'content-type': 'application/json' },
    body: JSON.stringify({ domain_id: domainId, runtime: 'alpha_code', name: 'tty' }),
  });
  expect(enrolled.status).toBe(201);
  agentId = ((await enrolled.json()) as { id: string }).id;
  writeFileSync(
    join(home, 'svcd', 'agents.toml'),
    `[[agent]]\nid = "${agentId}"\nruntime = "alpha_code"\nsupervise = true\npty = true\ncommand = ["node", ${JSON.stringify(SVCD_BIN)}, "reference-agent", "--interactive"]\n`,
  );
  svcd = startSvcd();
  await agentRunning();
  tmux('-f', '/dev/null', 'new-session', '-d', '-s', 'boot', '-x', '100', '-y', '30');
  tmux('set', '-g', 'status', 'off');
}, 90_000);

afterAll(async () => {
  tmux('kill-server');
  rmSync(join(process.env.TMUX_TMPDIR ?? '/tmp', `tmux-${process.getuid?.() ?? 0}`, TMUX_SOCKET), {
    force: true,
  });
  await stopAll();
  tmp.remove();
});

/** A fresh shell in its own tmux window, with the stty state saved for the restore check. */
function shell(name: string): string {
  tmux('new-window', '-d', '-n', name, 'sh');
  const target = `=boot:${name}`;
  tmux('resize-window', '-t', target, '-x', '100', '-y', '30');
  sendLine(target, 'S0=$(stty -g)');
  return target;
}

async function expectRestored(target: string): Promise<void> {
  sendLine(target, '[ "$S0" = "$(stty -g)" ] && echo TTY-RESTORED-$((40+2))');
  await waitFor('the shell with its terminal restored', () => pane(target).includes('TTY-RESTORED-42'));
}

describe('svc attach to a local agent (svcd.sock)', () => {
  it('types into the agent, shows its output, resizes its PTY and detaches with Ctrl-] d', async () => {
    const w = shell('local');
    sendLine(w, `node ${SVC_BIN} attach ${agentId}`);
    await waitFor('the attach banner', () => pane(w).includes(`attached to ${agentId} via svcd.sock`));
    sendLine(w, 'hello from tmux');
    await waitFor('the echo', () => pane(w).includes('echo: hello from tmux'));
    sendLine(w, 'run: stty size < /dev/tty');
    await waitFor('the PTY size of the tmux pane', () => pane(w).includes('30 100'));
    tmux('resize-window', '-t', w, '-x', '90', '-y', '25');
    sendLine(w, 'run: stty size < /dev/tty');
    await waitFor('the new size after SIGWINCH', () => pane(w).includes('25 90'));
    tmux('send-keys', '-t', w, 'C-]', 'd');
    await waitFor('the detach message', () => pane(w).includes(`[detached from ${agentId}]`));
    await expectRestored(w);
  });

  it('shows the current screen at once to a second attach', async () => {
    const w = shell('again');
    sendLine(w, `node ${SVC_BIN} attach --read-only ${agentId}`);
    await waitFor('the earlier output in the snapshot', () => pane(w).includes('echo: hello from tmux'));
    tmux('send-keys', '-t', w, 'C-]', 'd');
    await expectRestored(w);
  });
});
