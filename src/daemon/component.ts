// What a part of svcd is to the composition root (daemon.ts): a name, start() and stop(),
// and a summary for daemon.status. A leaf: components and infrastructure both import it.

/** A part of svcd with a lifecycle. stop() is idempotent and waits for its loops. */
export interface Component {
  readonly name: string;
  start(): Promise<void>;
  stop(): Promise<void>;
  /** Summary for daemon.status. */
  status?(): Record<string, unknown>;
}
