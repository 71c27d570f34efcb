// A real vendor ACP agent as the alpha_agent_acp runtime: @zed-industries/claude-agent-acp (a
// devDependency) speaks the same protocol as the reference agent. With no credentials here it
// refuses the prompt, and the task fails with the agent's own message.
import { createRequire } from 'node:module';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type NodeStack, startNodeStack } from '../support/node-stack.js';
import { waitFor } from '../support/poll.js';

const AGENT = createRequire(import.meta.url).resolve('@zed-industries/claude-agent-acp/dist/index.js');

interface Task {
  id: string;
  state: string;
  failure_reason: string | null;
  created_at: string;
  updated_at: string;
}

describe('a vendor ACP agent as a task runtime', () => {
  let stack: NodeStack;
  let domainId: string;
  let missionId: string;

  beforeAll(async () => {
    stack = await startNodeStack({
      name: 'vendor-acp',
      svcdFiles: {
        'config.toml': `[runtime.alpha_agent_acp]\ncommand = [${JSON.stringify(process.execPath)}, ${JSON.stringify(AGENT)}]\n`,
      },
      beforeSvcd: async (s) => {
        ({ domainId, missionId } = await s.mission('vendor', 'm'));
      },
      svcd: false,
    });
    // "No credentials": whatever vendor settings the test runner's environment has stay out.
    // IS_SANDBOX (set in some CI containers) makes the Claude CLI under the agent exit before
    // it answers session/new ("Query closed before response received"), a different failure.
    for (const k of Object.keys(stack.env))
      if (/^(ANTHROPIC|CLAUDE)_|^IS_SANDBOX$/.test(k)) delete stack.env[k];
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
    // Without credentials this agent opens a session and refuses the prompt ("Authentication
    // required"); where IS_SANDBOX is in the environment at all (the harness cannot remove what
    // the runner has), the Claude CLI under it exits first and session/new fails with the
    // details it gave. Either way the reason is the agent's own, not a timeout of svcd's.
    expect(done.failure_reason).toMatch(
      /^(agent error: Authentication required|ACP agent failed to start a session: Internal error \(Query closed before response received\))/,
    );
    // For the report (docs/agents.md): how long from submission to failure.
    console.log(
      `vendor ACP agent: failed ${Date.parse(done.updated_at) - Date.parse(done.created_at)} ms after submission`,
    );
  });
});
