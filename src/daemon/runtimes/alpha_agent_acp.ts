// alpha_agent_acp: a persistent JSON-RPC session using ACP over the agent's stdio (docs/agents.md).
// The session itself is acp-session.ts; this is the kind's definition.
import type { RuntimeDefinition } from './definition.js';

export const alphaAgentAcp: RuntimeDefinition = {
  kind: 'alpha_agent_acp',
  protocol: 'acp',
  summary: 'persistent ACP session over stdio; session updates become progress events',
  defaultCommand: ['svcd', 'reference-agent', '--acp'],
  example: ['npx', '@zed-industries/claude-code-acp'],
};
