// svc task / svc agent node list / svc agent list against a real tower: submit, list, get, cancel,
// retry refused outside failed, and the node and agent tables.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { run, SVC_BIN, startTowerProc, stopAll, type TowerProc } from '../support/procs.js';
import { makeTempDir } from '../support/tmp.js';

describe('svc task, agent node list, agent list', () => {
  let tower: TowerProc;
  let tmp: ReturnType<typeof makeTempDir>;
  let env: NodeJS.ProcessEnv;
  let missionId: string;
  let domainId: string;
  let nodeId: string;
  let agentId: string;
  const svc = (args: string[]) => run(SVC_BIN, args, env);
  const json = async <T>(args: string[]): Promise<T> => {
    const r = await svc(['--json', ...args]);
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    return JSON.parse(r.stdout) as T;
  };

  beforeAll(async () => {
    tmp = makeTempDir('svc-mesh-cli-');
    env = {
      SVC_HOME: tmp.dir,
      SVC_TOKEN: '',
      SVC_BASE_URL: '',
      SVC_NODE_FILE: join(tmp.dir, 'node.json'),
    };
    tower = await startTowerProc(env);
    env.SVC_BASE_URL = tower.url;
    domainId = (await json<{ id: string }>(['domain', 'create', 'mesh'])).id;
    missionId = (await json<{ id: string }>(['mission', 'create', 'work', '--domain', domainId])).id;
    nodeId = (await json<{ node_id: string }>(['agent', 'node', 'register', '--hostname', 'box1'])).node_id;
    const { jwt } = JSON.parse(readFileSync(join(tmp.dir, 'node.json'), 'utf8')) as { jwt: string };
    const res = await fetch(`${tower.url}/agents`, {
      method: 'POST',
      headers: { authorization: `Bearer ${jwt}`, 'content-type': 'application/json' },
      body: JSON.stringify({
        domain_id: domainId,
        runtime: 'beta_cli',
        name: 'coder',
        capabilities: ['gpu'],
      }),
    });
    expect(res.status).toBe(201);
    agentId = ((await res.json()) as { id: string }).id;
  });
  afterAll(async () => {
    await stopAll();
    tmp.remove();
  });

  it('submits, lists, gets and cancels a task; retry of a non-failed task exits 1', async () => {
    const t = await json<{ id: string; state: string; claim_policy: string; priority: number }>([
      'task',
      'submit',
      '--mission',
      missionId,
      '--title',
      'build it',
      '--priority',
      '5',
      '--capability',
      'gpu',
    ]);
    expect(t).toMatchObject({ state: 'pending', claim_policy: 'first_claim', priority: 5 });
    const assigned = await json<{ claim_policy: string; assigned_agent_id: string }>([
      'task',
      'submit',
      '--mission',
      missionId,
      '--title',
      'for coder',
      '--assign',
      agentId,
    ]);
    expect(assigned).toMatchObject({ claim_policy: 'assigned', assigned_agent_id: agentId });

    const table = await svc(['task', 'list', '--mission', missionId]);
    expect(table.code).toBe(0);
    expect(table.stdout).toMatch(/^ID\s+STATE\s+PRIO\s+POLICY/);
    expect(table.stdout).toContain('build it');
    expect(table.stdout).toContain('for coder');

    expect((await json<{ id: string }>(['task', 'get', t.id])).id).toBe(t.id);
    const retried = await svc(['task', 'retry', t.id]);
    expect(retried.code).toBe(1);
    expect(retried.stderr).toContain('only a failed task can be retried [illegal_transition]');
    const cancelled = await svc(['task', 'cancel', t.id]);
    expect(cancelled.code).toBe(0);
    expect(cancelled.stdout).toMatch(/^state:\s+cancelled$/m);
    const onlyCancelled = await json<{ items: { id: string }[] }>([
      'task',
      'list',
      '--mission',
      missionId,
      '--state',
      'cancelled',
    ]);
    expect(onlyCancelled.items.map((i) => i.id)).toEqual([t.id]);
  });

  it('refuses bad options as usage errors before contacting the tower', async () => {
    const bad = await svc(['task', 'submit', '--mission', missionId, '--title', 'x', '--policy', 'nope']);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain('--policy must be one of first_claim, assigned, broadcast');
    const noAgent = await svc([
      'task',
      'submit',
      '--mission',
      missionId,
      '--title',
      'x',
      '--policy',
      'assigned',
    ]);
    expect(noAgent.code).toBe(2);
    expect(noAgent.stderr).toContain('--assign');
    const state = await svc(['task', 'list', '--mission', missionId, '--state', 'done']);
    expect(state.code).toBe(2);
    const prio = await svc(['task', 'submit', 'x', '--mission', missionId, '--priority', 'high']);
    expect(prio.code).toBe(2);
    expect(prio.stderr).toContain('--priority must be an integer, got "high"');
  });

  it('lists nodes with their connection and agents with their status', async () => {
    const nodes = await svc(['agent', 'node', 'list']);
    expect(nodes.code).toBe(0);
    expect(nodes.stdout).toMatch(new RegExp(`${nodeId}\\s+box1\\s+no`));
    const agents = await json<{ items: { id: string; status: string; capabilities: string[] }[] }>([
      'agent',
      'list',
      '--node',
      nodeId,
    ]);
    expect(agents.items).toEqual([expect.objectContaining({ id: agentId, capabilities: ['gpu'] })]);
    const human = await svc(['agent', 'list', '--domain', domainId]);
    expect(human.stdout).toMatch(new RegExp(`${agentId}\\s+\\S+\\s+beta_cli\\s+${nodeId}`));
  });
});
