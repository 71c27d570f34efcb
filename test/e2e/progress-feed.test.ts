// An ACP reference agent supervised by a real svcd: its progress reaches the tower's feed
// (svcd outbox → POST /nodes/events → /events/stream), read back with `svc feed`.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type NodeStack, startNodeStack } from '../support/node-stack.js';
import { waitFor } from '../support/poll.js';
import { run, SVC_BIN } from '../support/procs.js';

describe('ACP progress on the tower feed', () => {
  let stack: NodeStack;
  const svc = (args: string[]) => stack.svc(args);

  beforeAll(async () => {
    stack = await startNodeStack({
      name: 'progress',
      svcdFiles: {
        'agents.toml': '[[agent]]\nid = "reviewer"\nruntime = "alpha_agent_acp"\nprofile = "review"\n',
      },
    });
    await waitFor(
      'the agent to run',
      async () => {
        const r = await run(SVC_BIN, ['--json', 'agent', 'supervise', 'status', 'reviewer'], stack.cli);
        return r.code === 0 && (JSON.parse(r.stdout) as { state: string }).state === 'running';
      },
      { timeoutMs: 90_000 },
    );
  });
  afterAll(async () => {
    await stack?.stop();
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
    const node = stack.node;
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
