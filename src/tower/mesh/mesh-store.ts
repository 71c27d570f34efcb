// The mesh area's one seam between SQL dialects: what SQLite (sqlite/) and PostgreSQL
// (postgres/) do differently, one implementation each, chosen once by service.ts. The
// operations are written once against it; nothing else in the area asks for the dialect.

import type { SvcError } from '../../protocol/errors.js';
import type { Claimed, MeshTask } from '../../protocol/mesh.js';
import type { Principal } from '../auth/principal.js';
import type { Tx, Write } from '../store/tx.js';
import type { Db } from '../store/types.js';
import type { MeshTaskRow } from './migrations.js';

/** A new task's row but its domain, which is its mission's. */
export type NewTaskRow = Omit<MeshTaskRow, 'domain_id'>;

/** The lease-holding transitions a store may do in one statement. */
export type LeasedKind = 'start' | 'complete' | 'fail';

/**
 * What the one-statement path made of a request: done (`done`, the changed task or what
 * stands for it), refused (not found, stale lease), or left to the general transaction.
 */
export type FastOutcome<T> = { done: T } | { refused: SvcError } | { general: true };

export interface MeshStore {
  /**
   * Writes a new task (not a broadcast: its runs are written by the general path) with its
   * mission entry and `created` event; `build` makes the row at the write's time. Refuses,
   * writing nothing, a mission `p` does not see (not_found) and an assigned agent not enrolled
   * in the mission's domain (agent_not_found).
   */
  insertTask(
    p: Principal,
    missionId: string,
    build: (nowMs: number, now: string) => NewTaskRow,
  ): Promise<MeshTaskRow>;
  /**
   * Claims up to `max` tasks `agentId` may take, best first (highest priority, then oldest),
   * each with its own lease and `claimed` event. Null when the agent is not one `p` may
   * claim for (unknown, of a domain `p` does not see, another node's).
   */
  claim(p: Principal, agentId: string, missionId: string | undefined, max: number): Promise<Claimed[] | null>;
  /** A lease-holding transition of `kind` in one statement, where the store has one. */
  leased(
    kind: LeasedKind,
    p: Principal,
    taskId: string,
    leaseId: string,
    arg: string | null,
  ): Promise<FastOutcome<MeshTask>>;
  /**
   * Completions of several tasks answered with acknowledgements (`done`: the completion's
   * time), one outcome per item in order.
   */
  completeAcks(
    p: Principal,
    items: readonly { taskId: string; leaseId: string; arg: string | null }[],
  ): Promise<FastOutcome<string>[]>;
  /**
   * Before a broadcast run changes in a transaction: lock its parent, so runs ending at once
   * settle the parent one after the other (a store whose writes never overlap needs nothing).
   */
  lockParent(tx: Tx, parentId: string): Promise<void>;
}

export interface MeshHooks {
  /** A task became claimable (new, retried, lease expired): tell nodes that could take it. */
  onClaimable?(task: MeshTask): void;
  /** A task was cancelled while claimed or running: tell the node running it. */
  onCancelled?(task: MeshTask): void;
  /** A claim call returned (metrics): the tasks it claimed, none when empty, and its duration. */
  onClaimed?(claims: Claimed[], seconds: number): void;
  /** A sweep returned expired leases' tasks to pending (requeued) or failed them (metrics). */
  onLeasesExpired?(counts: { requeued: number; failed: number }): void;
  /** Tasks reached a final state by a call (metrics; the sweep's failures: onLeasesExpired). */
  onFinished?(state: 'completed' | 'failed' | 'cancelled', n?: number): void;
}

/** What the operations use; each takes the part it needs. */
export interface MeshDeps {
  /** Reads outside a write. */
  db: Db;
  write: Write;
  store: MeshStore;
  hooks: MeshHooks;
}
