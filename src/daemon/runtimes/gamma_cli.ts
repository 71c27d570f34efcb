// gamma_cli: the command-line agent of a third vendor, run once per prompt.
import type { RuntimeDefinition } from './definition.js';

export const gammaCli: RuntimeDefinition = {
  kind: 'gamma_cli',
  protocol: 'cli',
  summary: 'command-line agent of a third vendor; one process per prompt',
  defaultCommand: ['svcd', 'reference-agent', '{prompt}'],
  example: ['gemini', '--prompt', '{prompt}'],
};
