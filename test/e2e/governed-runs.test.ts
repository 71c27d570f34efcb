// Governed agent runs with real processes (docs/agents.md, Permission policy; docs/worker.md,
// Branches and artifacts): a test ACP agent asks permission for an edit and an execute; the
// safe default allows the edit inside the worktree and asks an operator about the execute.
// Approve → the work is committed on svc/<task_id> and the diff kept as an artifact; reject →
// the agent is refused; no answer → rejected by the node with the reason. And with two tower
// replicas on one PostgreSQL schema: decided on the replica that does not hold the node's
// channel, the decision reaches the node over that channel (approval_decided), not its poll.
import { execFileSync } from 'node:child_process';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mgmtCall } from '../../src/cli/mgmt-client.js';
import { haproxyInstalled } from '../support/haproxy.js';
import { type NodeStack, startNodeStack, svcdConnected } from '../support/node-stack.js';
import { waitFor } from '../support/poll.js';
import {
  isolatedEnv,
  type Proc,
  run,
  SVC_BIN,
  SVCD_BIN,
  spawnProc,
  stopAll,
  type TowerProc,
} from '../support/procs.js';
import { type Replicas, startReplicas } from '../support/replicas.js';

interface Task {
  id: string;
  state: string;
  result: Record<string, unknown> | null;
  failure_reason: string | null;
}
interface Approval {
  id: string;
  status: string;
  task_id: string | null;
  node_id: string | null;
  reason: string | null;
  decided_by: string | null;
  tool_call: { kind: string; title: string; input: string; rule: string; options: unknown[] } | null;
}

const AGENT = resolve(import.meta.dirname, '../support/governed-acp-agent.mjs');
const config = (timeout: string, poll = '1s') => `[runtime.alpha_agent_acp]
command = [${JSON.stringify(process.execPath)}, ${JSON.stringify(AGENT)}]

[agent_policy]
approval_timeout = "${timeout}"
approval_poll = "${poll}"
`;

/** A git repository with one commit on main, for a mission's runs to branch from. */
function initRepo(repo: string): void {
  const git = (...args: string[]) => execFileSync('git', ['-C', repo, ...args], { encoding: 'utf8' });
  mkdirSync(repo);
  git('init', '-q', '-b', 'main');
  writeFileSync(join(repo, 'README.md'), 'hello\n');
  git('add', '-A');
  git('-c', 'user.name=t', '-c', 'user.email=t@t', 'commit', '-q', '-m', 'init');
}

describe('governed agent runs', () => {
  let stack: NodeStack;
  let domainId: string;
  let missionId: string;
  let repo: string;

  const api = async <T>(method: string, path: string, body?: unknown): Promise<T> => {
    const res = await stack.admin(method, path, body);
    const text = await res.text();
    if (res.status >= 400) throw new Error(`${method} ${path}: ${res.status} ${text}`);
    return JSON.parse(text) as T;
  };
  const git = (...args: string[]) => execFileSync('git', ['-C', repo, ...args], { encoding: 'utf8' }).trim();
  const submit = (title: string) =>
    api<Task>('POST', `/work/missions/${missionId}/tasks`, { title, max_attempts: 1 });
  const ended = (id: string) =>
    waitFor(
      `task ${id} to end`,
      async () => {
        const t = await api<Task>('GET', `/work/tasks/${id}`);
        return ['completed', 'failed', 'cancelled'].includes(t.state) ? t : null;
      },
      { timeoutMs: 60_000 },
    );
  const pendingApproval = (taskId: string) =>
    waitFor(
      `an approval for ${taskId}`,
      async () => {
        const r = await api<{ items: Approval[] }>('GET', `/approvals?task_id=${taskId}&status=pending`);
        return r.items[0] ?? null;
      },
      { timeoutMs: 60_000 },
    );

  beforeAll(async () => {
    stack = await startNodeStack({
      name: 'governed',
      svcdFiles: { 'config.toml': config('10m') },
      beforeSvcd: async (s) => {
        ({ domainId, missionId } = await s.mission('gov', 'm'));
        repo = join(s.tmp.dir, 'repo');
        initRepo(repo);
        await s.admin('PATCH', `/domains/${domainId}/m/${missionId}`, { repository: repo });
      },
    });
    await stack.svc(['run', 'alpha_agent_acp', '--domain', domainId]);
  });
  afterAll(async () => {
    await stack?.stop();
  });

  it('asks about the execute, waits, and on approval keeps the work on svc/<task_id> with its diff', async () => {
    const base = git('rev-parse', 'HEAD');
    const task = await submit('build it');
    const a = await pendingApproval(task.id);
    expect(a).toMatchObject({
      task_id: task.id,
      node_id: stack.node.node_id,
      tool_call: { kind: 'execute', title: 'Run echo built > built.txt', rule: 'default (safe)' },
    });
    expect(a.tool_call?.options).toHaveLength(2);
    // The token in the call's environment never reaches the tower.
    expect(a.tool_call?.input).toContain('echo built > built.txt');
    expect(a.tool_call?.input).not.toContain('sk-live');
    expect(a.tool_call?.input).toContain('[redacted]');
    // The feed shows it pending, and the task says it is waiting (its lease kept alive).
    const feed = await stack.svc(['--json', 'feed', '--since', '0', '--type', 'approval', '--limit', '1']);
    expect(JSON.parse(feed)).toMatchObject({ status: 'pending', payload: { id: a.id, task_id: task.id } });
    expect((await api<Task>('GET', `/work/tasks/${task.id}`)).state).toBe('running');

    await api('POST', `/approvals/${a.id}/approve`, { reason: 'go' });
    const done = await ended(task.id);
    expect(done.state).toBe('completed');
    const branch = `svc/${task.id}`;
    expect(done.result).toMatchObject({
      summary: 'edit: allowed; execute: allowed',
      branch,
      base_commit: base,
      head_commit: git('rev-parse', branch),
      files_changed: 2,
      insertions: 2,
      deletions: 0,
      diff_truncated: false,
      approvals: [{ approval_id: a.id, kind: 'execute', status: 'approved', reason: 'go', by: 'operator' }],
    });
    expect(git('show', `${branch}:built.txt`)).toBe('built');
    expect(git('show', `${branch}:notes.txt`)).toBe('governed');
    const art = await api<{ content_type: string; metadata: Record<string, unknown> }>(
      'GET',
      `/domains/${domainId}/m/${missionId}/artifacts/${String(done.result?.diff_artifact_id)}`,
    );
    expect(art.content_type).toBe('text/x-diff');
    expect(art.metadata).toMatchObject({ kind: 'diff', task_id: task.id, branch, truncated: false });
    expect(art.metadata.diff).toContain('+governed');
    expect(art.metadata.diff).toContain('+built');

    const shown = await stack.svc(['task', 'show', task.id]);
    expect(shown).toContain(branch);
    expect(shown).toContain(`${a.id}`);
    expect(shown).toMatch(/2 files? changed, 2 insertions\(\+\), 0 deletions\(-\)/);
  });

  it('refuses the tool call when the operator rejects it; the agent carries on without it', async () => {
    const task = await submit('build it again');
    const a = await pendingApproval(task.id);
    await stack.svc(['approvals', 'reject', a.id, '--reason', 'not on this box']);
    const done = await ended(task.id);
    expect(done.state).toBe('completed');
    expect(done.result).toMatchObject({
      summary: 'edit: allowed; execute: refused',
      approvals: [{ approval_id: a.id, status: 'rejected', reason: 'not on this box', by: 'operator' }],
    });
    expect(git('show', `svc/${task.id}:notes.txt`)).toBe('governed');
    expect(() => git('show', `svc/${task.id}:built.txt`)).toThrow();
  });

  it('rejects an approval nobody answers within approval_timeout, with the reason', async () => {
    stack.svcd?.kill('SIGTERM');
    await stack.svcd?.exited;
    writeFileSync(join(stack.home, 'svcd', 'config.toml'), config('1s'));
    await stack.startSvcd();
    const task = await submit('build it unattended');
    const done = await ended(task.id);
    expect(done.result).toMatchObject({
      summary: 'edit: allowed; execute: refused',
      approvals: [{ status: 'rejected', reason: 'no answer within 1s', by: 'timeout' }],
    });
    const id = (done.result as { approvals: { approval_id: string }[] }).approvals[0]?.approval_id;
    expect(await api<Approval>('GET', `/approvals/${id}`)).toMatchObject({
      status: 'rejected',
      reason: 'no answer within 1s',
      decided_by: 'governed-node',
    });
  });
});

describe.skipIf(!haproxyInstalled())('a governed run with two tower replicas', () => {
  let r: Replicas;
  let svcd: Proc;
  let mgmtSock: string;
  let nodeId: string;
  let domainId: string;
  let missionId: string;

  const api = async <T>(base: string, method: string, path: string, body?: unknown): Promise<T> => {
    const res = await r.call(base, method, path, body);
    if (res.status >= 400) throw new Error(`${method} ${path}: ${res.status} ${JSON.stringify(res.body)}`);
    return res.body as T;
  };

  beforeAll(async () => {
    r = await startReplicas({ n: 2, args: ['--rate-limit', '0'] });
    const [a] = r.towers as [TowerProc];
    const env = isolatedEnv(join(r.dir, 'node'));
    const home = env.SVC_HOME as string;
    for (const d of [home, env.HOME as string, join(home, 'svcd')])
      mkdirSync(d, { recursive: true, mode: 0o700 });
    const cli = { ...env, SVC_BASE_URL: a.url, SVC_TOKEN: r.admin };
    const svc = async (args: string[]) => {
      const out = await run(SVC_BIN, args, cli);
      if (out.code !== 0) throw new Error(`svc ${args.join(' ')} failed (${out.code}): ${out.stderr}`);
      return out.stdout;
    };
    await svc(['agent', 'node', 'register', '--hostname', 'governed-replicas']);
    nodeId = (JSON.parse(readFileSync(env.SVC_NODE_FILE as string, 'utf8')) as { node_id: string }).node_id;
    domainId = (JSON.parse(await svc(['--json', 'domain', 'create', 'gov-replicas'])) as { id: string }).id;
    missionId = (
      JSON.parse(await svc(['--json', 'mission', 'create', 'm', '--domain', domainId])) as { id: string }
    ).id;
    const repo = join(r.dir, 'repo');
    initRepo(repo);
    await api(a.url, 'PATCH', `/domains/${domainId}/m/${missionId}`, { repository: repo });
    // The node polls its approvals every 10 minutes: within this test, only approval_decided
    // can tell it the decision.
    writeFileSync(join(home, 'svcd', 'config.toml'), config('10m', '10m'));
    // svcd connects straight to replica a (not through HAProxy), so its channel stays there.
    svcd = spawnProc(SVCD_BIN, ['run', '--backend-url', a.url, '--log-level', 'warn'], env);
    mgmtSock = join(home, 'svcd', 'mgmt.sock');
    await svcdConnected(svcd, mgmtSock, 'svcd connected to replica a');
    await svc(['run', 'alpha_agent_acp', '--domain', domainId]);
  }, 300_000);
  afterAll(async () => {
    await stopAll();
    await r?.stop();
  });

  it('hears an approval decided on the replica without its channel over that channel, not by polling', async () => {
    const b = r.towers[1] as TowerProc;
    expect(await waitFor("the node's channel on replica a", () => r.holderOf(nodeId))).toBe(0);
    const task = await api<Task>(b.url, 'POST', `/work/missions/${missionId}/tasks`, {
      title: 'build it across replicas',
      max_attempts: 1,
    });
    const asked = await waitFor(
      `an approval for ${task.id}`,
      async () => {
        const list = await api<{ items: Approval[] }>(
          b.url,
          'GET',
          `/approvals?task_id=${task.id}&status=pending`,
        );
        return list.items[0] ?? null;
      },
      { timeoutMs: 60_000 },
    );
    expect(asked).toMatchObject({ node_id: nodeId, tool_call: { kind: 'execute' } });
    await api(b.url, 'POST', `/approvals/${asked.id}/approve`, { reason: 'decided on b' });
    const done = await waitFor(
      `task ${task.id} to end`,
      async () => {
        const t = await api<Task>(b.url, 'GET', `/work/tasks/${task.id}`);
        return ['completed', 'failed', 'cancelled'].includes(t.state) ? t : null;
      },
      { timeoutMs: 60_000 },
    );
    expect(done.state).toBe('completed');
    expect(done.result).toMatchObject({
      summary: 'edit: allowed; execute: allowed',
      approvals: [{ approval_id: asked.id, status: 'approved', reason: 'decided on b', by: 'operator' }],
    });
    // The channel was never reconnected (a reconnect polls every open approval at once).
    const status = await mgmtCall<{ components: { control: { connects: number } } }>(
      mgmtSock,
      'daemon.status',
    );
    expect(status.components.control.connects).toBe(1);
    expect(await r.holderOf(nodeId)).toBe(0);
  });
});
