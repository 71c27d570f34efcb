// What a command needs from its surroundings, passed in so commands are testable:
// environment, paths, output streams.
import type { SvcPaths } from '../lib/home.js';

export interface CliIO {
  env: NodeJS.ProcessEnv;
  paths: SvcPaths;
  out(text: string): void;
  /** Writes text to stdout exactly as given (no newline added). */
  write?(text: string): void;
  err(text: string): void;
  /** Reads all of stdin (for secrets and piped input). */
  readStdin(): Promise<string>;
  /** True when stdin is a terminal (a secret would be typed with echo on). */
  stdinIsTTY?(): boolean;
  /** True when stderr is a terminal (a person reads the logs: pretty by default). */
  stderrIsTTY?(): boolean;
}
