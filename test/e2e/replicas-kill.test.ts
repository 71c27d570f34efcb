// Two tower replicas on one PostgreSQL schema behind a real HAProxy, a real svcd connected
// through it with a task worker: the replica holding the node's control channel is killed with
// -9 while a mesh task runs in a subagent on the node. svcd reconnects through HAProxy to the
// survivor, the run carries on (its heartbeats, progress and completion go through the
// balancer to the survivor), the task completes once — one claim, one run, one `completed`
// transition — and presence converges: the survivor holds the node, the killed replica holds
// nothing, and the balancer says the node is online.
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mgmtCall } from '../../src/cli/mgmt-client.js';
import { haproxyInstalled } from '../support/haproxy.js';
import { waitFor } from '../support/poll.js';
import type { Proc } from '../support/procs.js';
import { type ReplicaNode, startReplicaNode } from '../support/replica-node.js';

interface Task {
  id: string;
  state: string;
  attempt: number;
  claimed_by: string | null;
  result: { summary?: string } | null;
}

interface FeedEvent {
  id: string;
  type: string;
  payload: Record<string, unknown>;
}

interface Loop {
  runtime: string;
  agent_id: string;
  running: { task_id: string }[];
  counts: { claimed: number; completed: number; failed: number; cancelled: number; abandoned: number };
  recent_claims: { task_id: string }[];
}

describe.skipIf(!haproxyInstalled())('a replica killed with -9 while a node runs a task', () => {
  let n: ReplicaNode;
  let missionId: string;
  let loop: Loop;

  const getTask = async (base: string, id: string) =>
    (await n.api<Task>(base, 'GET', `/work/tasks/${id}`)).body;
  const loops = async () =>
    (JSON.parse(await n.svc(['--json', 'worker', 'status'])) as { loops: Loop[] }).loops;

  /** Every event of the task the tower keeps, oldest first (GET /events?task_id, every page). */
  async function taskEvents(base: string, taskId: string): Promise<FeedEvent[]> {
    const all: FeedEvent[] = [];
    let before: string | null = null;
    for (;;) {
      const q: URLSearchParams = new URLSearchParams({
        task_id: taskId,
        limit: '500',
        ...(before ? { before } : {}),
      });
      const page: { status: number; body: { items: FeedEvent[]; next_cursor: string | null } } = await n.api<{
        items: FeedEvent[];
        next_cursor: string | null;
      }>(base, 'GET', `/events?${q}`);
      expect(page.status).toBe(200);
      all.push(...page.body.items);
      if (page.body.next_cursor === null) break;
      before = page.body.next_cursor;
    }
    return all.reverse();
  }

  beforeAll(async () => {
    n = await startReplicaNode({ hostname: 'kill-node' });
    const lb = n.r.lb.url;
    const d = await n.api<{ id: string }>(lb, 'POST', '/domains', { name: 'kill' });
    const m = await n.api<{ id: string }>(lb, 'POST', `/domains/${d.body.id}/m`, { name: 'across' });
    expect([d.status, m.status]).toEqual([201, 201]);
    missionId = m.body.id;
    loop = JSON.parse(
      await n.svc(['--json', 'run', 'alpha_agent_acp', '--domain', d.body.id, '--max-concurrent', '1']),
    ) as Loop;
  }, 300_000);
  afterAll(async () => {
    await n?.stop();
  });

  it('completes the task once through the survivor, and presence converges there', async () => {
    const lb = n.r.lb.url;
    const runs = join(n.r.dir, 'runs');
    const release = join(n.r.dir, 'release');
    // The run reports progress, then waits in a command until the test releases it — after the
    // kill and the reconnect, so the kill lands mid-run whatever the machine's speed.
    const created = await n.api<Task>(lb, 'POST', `/work/missions/${missionId}/tasks`, {
      title: 'across the kill',
      description: [
        'progress: 2',
        'sleep: 1',
        `run: echo run >> ${runs}; while [ ! -f ${release} ]; do sleep 0.1; done; echo released`,
        'progress: 1',
      ].join('\n'),
    });
    expect(created.status).toBe(201);
    const id = created.body.id;
    await waitFor('the run to wait for its release', () => existsSync(runs));
    expect(await getTask(lb, id)).toMatchObject({ state: 'running', attempt: 1, claimed_by: loop.agent_id });

    const holder = (await n.holderIndex()) as number;
    const survivor = 1 - holder;
    const survivorId = await n.replicaId(survivor);
    const victim = n.r.towers[holder] as Proc;
    victim.kill('SIGKILL');
    await victim.exited;

    // svcd reconnects through HAProxy, which sends it to the survivor.
    await waitFor('the node to reconnect to the survivor', async () => (await n.holderIndex()) === survivor, {
      timeoutMs: 120_000,
    });
    const status = await mgmtCall<{ tower: { connected: boolean } }>(n.mgmtSock, 'daemon.status');
    expect(status.tower.connected).toBe(true);
    // Still the first run: the lease held through the kill, nobody claimed the task again.
    expect(await getTask(lb, id)).toMatchObject({ state: 'running', attempt: 1 });

    const beforeRelease = BigInt(
      (await n.api<{ last_event_id: string }>(lb, 'GET', '/events?limit=1')).body.last_event_id,
    );
    writeFileSync(release, '');
    const done = await waitFor(
      'the task to complete',
      async () => {
        const t = await getTask(lb, id);
        return t.state === 'completed' ? t : null;
      },
      { timeoutMs: 90_000 },
    );
    expect(done).toMatchObject({ state: 'completed', attempt: 1, claimed_by: loop.agent_id });
    expect(done.result?.summary).toContain('released');
    // One run on the node: the command started once.
    expect(readFileSync(runs, 'utf8')).toBe('run\n');

    // The feed has each transition once, and one subagent run's progress.
    const events = await taskEvents(lb, id);
    const transitions = events.filter((e) => e.type === 'matrix').map((e) => e.payload.action);
    expect(transitions).toEqual(['created', 'claimed', 'started', 'completed']);
    const started = events.filter(
      (e) => e.type === 'progress' && (e.payload.data as { kind?: string })?.kind === 'started',
    );
    expect(started).toHaveLength(1);
    // What the run reported after the kill (the command's end, the last step) reached the feed.
    const late = events.filter((e) => e.type === 'progress' && BigInt(e.id) > beforeRelease);
    expect(late.map((e) => e.payload.text)).toEqual([
      'released\n', // the command's output
      'released\n', // the answer
      'step 1 of 1\n',
      'made 1 progress steps\n',
    ]);

    // The worker claimed it once and ran it once.
    // (The loop counts the run once the subagent has returned, just after the tower took it.)
    const after = await waitFor('the loop to count the run', async () => {
      const l = (await loops()).find((x) => x.agent_id === loop.agent_id);
      return l?.counts.completed === 1 ? l : null;
    });
    expect(after.recent_claims.filter((c) => c.task_id === id)).toHaveLength(1);
    expect(after.counts).toMatchObject({ claimed: 1, completed: 1, failed: 0, abandoned: 0 });
    expect(after.running).toEqual([]);

    // Presence converged: one row, the survivor's; none left for the killed replica.
    expect(await n.channels()).toEqual([{ replica_id: survivorId, address: n.r.towers[survivor]?.url }]);
    for (let i = 0; i < 2; i++) {
      const node = await n.api<{ online: boolean }>(lb, 'GET', `/nodes/${n.node.node_id}`);
      expect([node.status, node.body.online]).toEqual([200, true]);
    }
    const nodeStatus = await n.api<{ node_id: string }>(lb, 'GET', `/nodes/${n.node.node_id}/status`);
    expect([nodeStatus.status, nodeStatus.body.node_id]).toEqual([200, n.node.node_id]);
  }, 240_000);
});
