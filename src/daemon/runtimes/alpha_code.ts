// alpha_code: a one-shot, non-interactive CLI invocation per prompt (docs/agents.md).
import type { RuntimeDefinition } from './definition.js';

export const alphaCode: RuntimeDefinition = {
  kind: 'alpha_code',
  protocol: 'cli',
  summary: 'one-shot non-interactive CLI invocation; result = exit code and output',
  defaultCommand: ['svcd', 'reference-agent', '{prompt}'],
  example: ['claude', '-p', '{prompt}', '--output-format', 'text'],
};
