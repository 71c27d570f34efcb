// Metrics end to end with real processes: a tower, a node's svcd with a supervised agent, a
// cron job, the task worker and the fan-out on a loopback port. Each svcd metric moves when
// its cause happens and shows in `svc daemon metrics` (text and --json) and on the fan-out
// listener's GET /metrics (bearer token, like /events); the tower counts the node online.
import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { mgmtCall } from '../../src/cli/mgmt-client.js';
import { type NodeStack, startNodeStack } from '../support/node-stack.js';
import { waitFor } from '../support/poll.js';
import { run, SVCD_BIN } from '../support/procs.js';
import { samples } from '../support/prom.js';

let stack: NodeStack;
let domainId: string;
let missionId: string;
let fanout: { listen: string; token: string };

beforeAll(async () => {
  stack = await startNodeStack({
    name: 'metrics',
    svcdFiles: {
      'config.toml': '[fanout]\nenable = true\nlisten = "127.0.0.1:0"\n',
      'agents.toml':
        '[[agent]]\nid = "sleeper"\nruntime = "alpha_code"\nsupervise = true\ncommand = ["sleep", "600"]\n',
      // Every minute: the start-up tick fires the current one at once.
      'cron.toml': '[[job]]\nname = "stamp"\nschedule = "* * * * *"\ndispatch = "bash"\nprompt = "exit 3"\n',
    },
    beforeSvcd: async (s) => {
      ({ domainId, missionId } = await s.mission('metrics', 'm'));
    },
  });
  const s = await waitFor(
    'the fan-out to follow the tower',
    async () => {
      const st = await mgmtCall<{ listen: string; token_file: string; upstream: { state: string } }>(
        stack.mgmtSock,
        'fanout.status',
      );
      return st.upstream.state === 'up' ? st : null;
    },
    { timeoutMs: 30_000 },
  );
  fanout = { listen: s.listen, token: readFileSync(s.token_file, 'utf8').trim() };
});
afterAll(async () => {
  await stack?.stop();
});

const daemonMetrics = async () => samples(await stack.svc(['daemon', 'metrics']));

it('counts cron fires and failures, restarts, worker runs, secrets requests and fan-out relays', async () => {
  const fired = await waitFor('the start-up fire to fail', async () => {
    const m = await daemonMetrics();
    return m.get('svcd_cron_failures_total{job="stamp",outcome="failed"}') === 1 ? m : null;
  });
  expect(fired.get('svcd_cron_fires_total{job="stamp"}')).toBe(1);
  expect(fired.get('svcd_cron_fire_delay_seconds_count')).toBe(1);

  await stack.svc(['agent', 'supervise', 'restart', 'sleeper']);
  expect((await daemonMetrics()).get('svcd_agent_restarts_total{agent="sleeper",cause="manual"}')).toBe(1);

  // A request with a session svcd never minted: refused, and counted by its code.
  const bogus = await run(SVCD_BIN, ['get-secret', 'NOPE'], {
    ...stack.env,
    SVC_SECRETS_SOCKET: `${stack.home}/svcd/secrets.sock`,
    SVC_SECRETS_SESSION: 'x'.repeat(43),
  });
  expect(bogus.code).not.toBe(0);
  const refused = [...(await daemonMetrics())].filter(([k]) => k.startsWith('svcd_secrets_requests_total'));
  expect(refused.map(([, v]) => v)).toEqual([1]);
  expect(refused[0]?.[0]).not.toContain('outcome="ok"');

  // A local consumer of the fan-out, and a tower event relayed to it.
  const consumer = new AbortController();
  const stream = await fetch(`${fanout.listen}/events`, {
    headers: { authorization: `Bearer ${fanout.token}` },
    signal: consumer.signal,
  });
  expect(stream.status).toBe(200);
  try {
    expect((await daemonMetrics()).get('svcd_fanout_subscribers')).toBe(1);
    await stack.svc(['run', 'alpha_agent_acp', '--domain', domainId]);
    const task = (await (
      await stack.admin('POST', `/work/missions/${missionId}/tasks`, { title: 'run: echo hi' })
    ).json()) as { id: string };
    const m = await waitFor(
      'the run to be counted',
      async () => {
        const x = await daemonMetrics();
        return x.get('svcd_worker_runs_total{outcome="completed"}') === 1 ? x : null;
      },
      { timeoutMs: 60_000 },
    );
    expect(m.get('svcd_fanout_relay_lag_seconds_count')).toBeGreaterThan(0);
    const t = (await (await stack.admin('GET', `/work/tasks/${task.id}`)).json()) as { state: string };
    expect(t.state).toBe('completed');
  } finally {
    consumer.abort();
  }

  // The tower's side of the same run.
  const towerMetrics = async () => samples(await (await stack.admin('GET', '/metrics')).text());
  // The agent's presence comes back from busy over the control channel.
  const tower = await waitFor('the agent idle again', async () => {
    const x = await towerMetrics();
    return x.get('svc_agents{presence="idle"}') === 1 ? x : null;
  });
  expect(tower.get('svc_nodes_online')).toBe(1);
  expect(tower.get('svc_mesh_tasks_finished_total{state="completed"}')).toBe(1);
  expect(tower.get('svc_mesh_claims_total')).toBe(1);
});

it('serves the same metrics as JSON samples and on the fan-out listener with its token', async () => {
  const json = JSON.parse(await stack.svc(['--json', 'daemon', 'metrics'])) as {
    name: string;
    type: string;
    labels: Record<string, string>;
    value: number;
  }[];
  expect(json.find((s) => s.name === 'svcd_agent_restarts_total')).toEqual({
    name: 'svcd_agent_restarts_total',
    type: 'counter',
    labels: { agent: 'sleeper', cause: 'manual' },
    value: 1,
  });
  expect(json.filter((s) => s.name === 'svcd_cron_fire_delay_seconds_count')).toHaveLength(1);

  expect((await fetch(`${fanout.listen}/metrics`)).status).toBe(401);
  const res = await fetch(`${fanout.listen}/metrics`, {
    headers: { authorization: `Bearer ${fanout.token}` },
  });
  expect(res.status).toBe(200);
  expect(res.headers.get('content-type')).toMatch(/^text\/plain/);
  const m = samples(await res.text());
  expect(m.get('svcd_agent_restarts_total{agent="sleeper",cause="manual"}')).toBe(1);
  expect(m.get('svcd_worker_runs_total{outcome="completed"}')).toBe(1);
});
