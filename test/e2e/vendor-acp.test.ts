// Real vendor ACP agents as the alpha_agent_acp runtime: @zed-industries/codex-acp and
// @zed-industries/claude-agent-acp (devDependencies) speak the same protocol as the reference
// agent. With no credentials here each refuses, and the task fails with the agent's own
// message. How long that takes is logged with where the time went (docs/agents.md, Vendor ACP
// agents): codex-acp (a native binary) refuses session/new at once; the Claude CLI under
// claude-agent-acp first loads and probes the machine for a few seconds.
import { createRequire } from 'node:module';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type NodeStack, startNodeStack } from '../support/node-stack.js';
import { waitFor } from '../support/poll.js';

const resolve = createRequire(import.meta.url).resolve;

interface Task {
  id: string;
  state: string;
  failure_reason: string | null;
  created_at: string;
  updated_at: string;
}

const AGENTS = [
  {
    name: 'codex-acp',
    script: resolve('@zed-industries/codex-acp/bin/codex-acp.js'),
    // It checks for credentials when a session is opened.
    reason: /^ACP agent failed to start a session: Authentication required/,
  },
  {
    name: 'claude-agent-acp',
    script: resolve('@zed-industries/claude-agent-acp/dist/index.js'),
    // Without credentials this agent opens a session and refuses the prompt ("Authentication
    // required"); where IS_SANDBOX is in the environment at all (the harness cannot remove what
    // the runner has), or when the Claude CLI under it exits early, session/new fails with the
    // details the CLI gave.
    reason:
      /^(agent error: Authentication required|ACP agent failed to start a session: Internal error \(Query closed before response received\))/,
  },
];

describe.each(AGENTS)('$name as a task runtime', (agent) => {
  let stack: NodeStack;
  let domainId: string;
  let missionId: string;

  beforeAll(async () => {
    stack = await startNodeStack({
      name: `vendor-${agent.name}`,
      svcdFiles: {
        'config.toml': `[runtime.alpha_agent_acp]\ncommand = [${JSON.stringify(process.execPath)}, ${JSON.stringify(agent.script)}]\n`,
      },
      beforeSvcd: async (s) => {
        ({ domainId, missionId } = await s.mission('vendor', 'm'));
      },
      svcd: false,
    });
    // "No credentials": whatever vendor settings the test runner's environment has stay out.
    // IS_SANDBOX (set in some CI containers) makes the Claude CLI exit before it answers
    // session/new ("Query closed before response received").
    for (const k of Object.keys(stack.env))
      if (/^(ANTHROPIC|CLAUDE|OPENAI|CODEX)_|^IS_SANDBOX$/.test(k)) delete stack.env[k];
    await stack.startSvcd();
    await stack.svc(['run', 'alpha_agent_acp', '--domain', domainId]);
  });
  afterAll(async () => {
    await stack?.stop();
  });

  it("fails the task with the agent's own message when it has no credentials", async () => {
    const res = await stack.admin('POST', `/work/missions/${missionId}/tasks`, {
      title: 'say hello',
      max_attempts: 1,
    });
    const task = (await res.json()) as Task;
    const done = await waitFor(
      'the task to end',
      async () => {
        const t = (await (await stack.admin('GET', `/work/tasks/${task.id}`)).json()) as Task;
        return t.state === 'failed' || t.state === 'completed' ? t : null;
      },
      { timeoutMs: 60_000 },
    );
    expect(done.state).toBe('failed');
    // The reason is the agent's own, not a timeout of svcd's.
    expect(done.failure_reason).toMatch(agent.reason);
    // For the report (docs/agents.md): how long from submission to failure, and where the time
    // went — each event of the task, and the run's start and end marks in its log.
    const events = (await (
      await stack.admin('GET', `/events?task_id=${task.id}&mission_id=${missionId}&limit=50`)
    ).json()) as { items: { ts: string; type: string; payload: { action?: string } }[] };
    const t0 = Date.parse(done.created_at);
    const steps = events.items
      .reverse()
      .map((e) => `${Date.parse(e.ts) - t0} ms ${e.payload.action ?? e.type}`);
    console.log(
      `vendor ACP agent ${agent.name}: failed ${Date.parse(done.updated_at) - t0} ms after submission (${steps.join(', ')})`,
    );
  });
});
