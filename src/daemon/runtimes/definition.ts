// What a runtime kind is (the shape each runtimes/<kind>.ts fills in; kinds.ts indexes them).
import type { RuntimeKind } from '../../protocol/runtimes.js';

export interface RuntimeDefinition {
  kind: RuntimeKind;
  /**
   * cli: one process per prompt, the result is its exit code and output.
   * acp: a persistent ACP session over stdio, the result of a prompt is its stop reason.
   * pane: a long-running interactive agent in a tmux pane, prompted by typing into it.
   */
  protocol: 'cli' | 'acp' | 'pane';
  summary: string;
  /** Used when config.toml has no [runtime.<kind>]: the package's reference agent. */
  defaultCommand: readonly string[];
  /** A vendor CLI as it is typically configured (documentation only). */
  example: readonly string[];
}
