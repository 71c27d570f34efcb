// mux_hosted: a long-running interactive agent in a tmux pane; `svc agent signal` types the
// prompt into the pane and presses Enter (supervisor/backends/tmux.ts does the typing).
// As an ephemeral subagent (task worker) it runs like a CLI kind: one process per prompt.
import type { RuntimeDefinition } from './definition.js';

export const muxHosted: RuntimeDefinition = {
  kind: 'mux_hosted',
  protocol: 'pane',
  summary: 'long-running interactive agent in a tmux pane; signalled by typing into it',
  defaultCommand: ['svcd', 'reference-agent', '--interactive'],
  example: ['claude'],
};
