// Presence shared by the replicas (docs/architecture.md, The control channel): which replica
// holds each node's control channel, in the store, so every replica answers "is node X
// online, and where" the same way. A replica writes a row for itself (its address, renewed
// every PRESENCE_RENEW_MS) and one row per channel it holds (written when the node says
// hello, deleted when the channel closes). A channel counts only while its replica's row is
// fresh: a replica killed with -9 stops renewing, and its nodes read offline at most
// PRESENCE_TTL_MS after its last renewal, or sooner when they reconnect elsewhere (the new
// replica overwrites the row). Channel writes are grouped: a reconnect storm costs a few
// transactions, not one per node. Owns nothing of the channel itself (control-hub.ts).
import { randomBytes } from 'node:crypto';
import { type Clock, iso } from '../../lib/clock.js';
import type { Logger } from '../../lib/log.js';
import type { Write } from '../store/tx.js';
import type { Db } from '../store/types.js';

export const PRESENCE_RENEW_MS = 5_000;
/** A replica not renewed for this long is gone, and so are its nodes' channels. */
export const PRESENCE_TTL_MS = 15_000;
/** Rows of replicas gone this long are deleted (with their channels) by any live replica. */
const FORGET_AFTER_MS = 3_600_000;

export interface Holder {
  replicaId: string;
  /** Base URL other replicas reach it at. */
  address: string;
}

/** Whether a replica row renewed at `renewedAt` (ISO) still counts at `now` (ms). */
export function replicaFresh(renewedAt: string, now: number, ttlMs = PRESENCE_TTL_MS): boolean {
  return Date.parse(renewedAt) > now - ttlMs;
}

/** A fresh replica id: 12 hex digits (ids of stream and ticket owners embed it). */
export function newReplicaId(): string {
  return randomBytes(6).toString('hex');
}

export interface PresenceDeps {
  db: Db;
  write: Write;
  clock: Clock;
  log: Logger;
  replicaId?: string;
  renewMs?: number;
  ttlMs?: number;
}

export class Presence {
  readonly replicaId: string;
  private readonly db: Db;
  private readonly write: Write;
  private readonly clock: Clock;
  private readonly log: Logger;
  private readonly renewMs: number;
  private readonly ttlMs: number;
  /** Channel changes not written yet: node → held (true) or released (false). */
  private queued = new Map<string, boolean>();
  private flushing: Promise<void> | null = null;
  private timer: { cancel(): void } | null = null;
  private address: string | null = null;
  private stopped = false;
  private renewed = 0;

  constructor(deps: PresenceDeps) {
    this.db = deps.db;
    this.write = deps.write;
    this.clock = deps.clock;
    this.log = deps.log.child({ component: 'presence' });
    this.replicaId = deps.replicaId ?? newReplicaId();
    this.renewMs = deps.renewMs ?? PRESENCE_RENEW_MS;
    this.ttlMs = deps.ttlMs ?? PRESENCE_TTL_MS;
  }

  /** When this replica's row was last written (ms on the injected clock; 0: never). */
  get renewedAt(): number {
    return this.renewed;
  }

  /** Registers this replica at `address` (once it listens) and starts renewing. */
  async start(address: string): Promise<void> {
    this.address = address;
    const now = iso(this.clock.now());
    await this.write(async (tx) => {
      await tx.db
        .insertInto('tower_replicas')
        .values({ id: this.replicaId, address, started_at: now, renewed_at: now })
        .onConflict((oc) => oc.column('id').doUpdateSet({ address, renewed_at: now }))
        .execute();
    });
    this.renewed = Date.parse(now);
    this.schedule();
  }

  private schedule(): void {
    if (this.stopped) return;
    this.timer = this.clock.setTimeout(() => {
      void this.renew().finally(() => this.schedule());
    }, this.renewMs);
  }

  private async renew(): Promise<void> {
    if (this.address === null) return;
    const nowMs = this.clock.now();
    const now = iso(nowMs);
    const forget = iso(nowMs - FORGET_AFTER_MS);
    try {
      await this.write(async (tx) => {
        const r = await tx.db
          .updateTable('tower_replicas')
          .set({ renewed_at: now })
          .where('id', '=', this.replicaId)
          .executeTakeFirst();
        // Deleted by another replica after a long stall: register again.
        if (Number(r.numUpdatedRows) === 0) {
          await tx.db
            .insertInto('tower_replicas')
            .values({ id: this.replicaId, address: this.address as string, started_at: now, renewed_at: now })
            .execute();
        }
        const gone = tx.db.selectFrom('tower_replicas').select('id').where('renewed_at', '<', forget);
        await tx.db.deleteFrom('node_channels').where('replica_id', 'in', gone).execute();
        await tx.db.deleteFrom('tower_replicas').where('renewed_at', '<', forget).execute();
      });
      this.renewed = nowMs;
    } catch (e) {
      this.log.warn({ err: e }, 'cannot renew this replica in the store; its nodes may read offline');
    }
  }

  /** This replica now holds the node's channel. */
  held(nodeId: string): Promise<void> {
    this.queued.set(nodeId, true);
    return this.flushSoon();
  }

  /** This replica no longer holds the node's channel (another may by now). */
  released(nodeId: string): Promise<void> {
    this.queued.set(nodeId, false);
    return this.flushSoon();
  }

  private flushSoon(): Promise<void> {
    // One write at a time; what arrives meanwhile goes in the next one.
    this.flushing ??= (async () => {
      while (this.queued.size > 0) {
        const batch = this.queued;
        this.queued = new Map();
        await this.flush(batch).catch((e: unknown) =>
          this.log.warn({ err: e, nodes: batch.size }, 'cannot record node presence'),
        );
      }
      this.flushing = null;
    })();
    return this.flushing;
  }

  private async flush(batch: Map<string, boolean>): Promise<void> {
    const held = [...batch].filter(([, h]) => h).map(([id]) => id);
    const released = [...batch].filter(([, h]) => !h).map(([id]) => id);
    await this.write(async (tx) => {
      for (let i = 0; i < held.length; i += 500) {
        const rows = held
          .slice(i, i + 500)
          .map((node_id) => ({ node_id, replica_id: this.replicaId, connected_at: tx.now }));
        await tx.db
          .insertInto('node_channels')
          .values(rows)
          .onConflict((oc) =>
            oc.column('node_id').doUpdateSet((eb) => ({
              replica_id: eb.ref('excluded.replica_id'),
              connected_at: eb.ref('excluded.connected_at'),
            })),
          )
          .execute();
      }
      for (let i = 0; i < released.length; i += 500) {
        await tx.db
          .deleteFrom('node_channels')
          .where('node_id', 'in', released.slice(i, i + 500))
          .where('replica_id', '=', this.replicaId)
          .execute();
      }
    });
  }

  /** The live replica holding the node's channel, or null (offline everywhere). */
  async holder(nodeId: string): Promise<Holder | null> {
    const row = await this.db
      .selectFrom('node_channels')
      .innerJoin('tower_replicas', 'tower_replicas.id', 'node_channels.replica_id')
      .select(['tower_replicas.id', 'tower_replicas.address', 'tower_replicas.renewed_at'])
      .where('node_channels.node_id', '=', nodeId)
      .executeTakeFirst();
    if (!row || !replicaFresh(row.renewed_at, this.clock.now(), this.ttlMs)) return null;
    return { replicaId: row.id, address: row.address };
  }

  /** Of `nodeIds`, those with a channel on a live replica. */
  async online(nodeIds: string[]): Promise<Set<string>> {
    const out = new Set<string>();
    if (nodeIds.length === 0) return out;
    const rows = await this.db
      .selectFrom('node_channels')
      .innerJoin('tower_replicas', 'tower_replicas.id', 'node_channels.replica_id')
      .select(['node_channels.node_id', 'tower_replicas.renewed_at'])
      .where('node_channels.node_id', 'in', nodeIds)
      .execute();
    const now = this.clock.now();
    for (const r of rows) if (replicaFresh(r.renewed_at, now, this.ttlMs)) out.add(r.node_id);
    return out;
  }

  /** The address of a live replica by id (the owner of a stream or ticket), or null. */
  async replica(replicaId: string): Promise<Holder | null> {
    const row = await this.db
      .selectFrom('tower_replicas')
      .select(['id', 'address', 'renewed_at'])
      .where('id', '=', replicaId)
      .executeTakeFirst();
    if (!row || !replicaFresh(row.renewed_at, this.clock.now(), this.ttlMs)) return null;
    return { replicaId: row.id, address: row.address };
  }

  /** Stops renewing and removes this replica and its channels (a clean shutdown). */
  async stop(): Promise<void> {
    if (this.stopped) return;
    this.stopped = true;
    this.timer?.cancel();
    await this.flushing;
    if (this.address === null) return;
    await this.write(async (tx) => {
      await tx.db.deleteFrom('node_channels').where('replica_id', '=', this.replicaId).execute();
      await tx.db.deleteFrom('tower_replicas').where('id', '=', this.replicaId).execute();
    }).catch((e: unknown) => this.log.warn({ err: e }, 'cannot remove this replica from the store'));
  }
}
