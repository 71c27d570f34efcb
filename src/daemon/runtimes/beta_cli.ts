// beta_cli: the command-line coding agent of a second vendor, run once per prompt.
import type { RuntimeDefinition } from './definition.js';

export const betaCli: RuntimeDefinition = {
  kind: 'beta_cli',
  protocol: 'cli',
  summary: 'command-line coding agent of a second vendor; one process per prompt',
  defaultCommand: ['svcd', 'reference-agent', '{prompt}'],
  example: ['codex', 'exec', '--cd', '{workdir}', '{prompt}'],
};
