// The mesh store on PostgreSQL: creation, claims and the lease-holding transitions each as
// one statement on the hot pool (named, planned once per connection: store/open.ts), the
// transitions coalesced per kind; broadcast runs lock their parent in the general path.
import { sql } from 'kysely';
import { type Clock, iso } from '../../../lib/clock.js';
import type { Principal } from '../../auth/principal.js';
import type { Write } from '../../store/tx.js';
import { type LeftAlone, leftAloneVerdict } from '../lease.js';
import type { FastOutcome, LeasedKind, MeshStore } from '../mesh-store.js';
import { assignedAgentNotFound, missionNotFound, staleLease, taskNotFound, taskOf } from '../task.js';
import { LeasedBatcher } from './batcher.js';
import { pgClaim } from './claim.js';
import { pgCreate } from './create.js';
import { COMPLETE, COMPLETE_ACK, FAIL, type LeasedAck, START } from './leased.js';

export interface PostgresMeshOptions {
  write: Write;
  clock: Clock;
  /** Statements of one kind under way at once (default batcher.ts DEFAULT_IN_FLIGHT). */
  maxInFlight?: number;
}

const GENERAL: FastOutcome<never> = { general: true };

export function createPostgresMeshStore(opts: PostgresMeshOptions): MeshStore {
  const { write, clock, maxInFlight } = opts;
  const batchers: Record<LeasedKind, LeasedBatcher> = {
    start: new LeasedBatcher(write, clock, START, maxInFlight),
    complete: new LeasedBatcher(write, clock, COMPLETE, maxInFlight),
    fail: new LeasedBatcher(write, clock, FAIL, maxInFlight),
  };
  const acks = new LeasedBatcher<LeasedAck>(write, clock, COMPLETE_ACK, maxInFlight);
  return {
    async insertTask(p, missionId, build) {
      const nowMs = clock.now();
      const row = build(nowMs, iso(nowMs));
      const made = await pgCreate(write, p, row);
      if (made === null) throw missionNotFound(missionId);
      if (!made.agentEnrolled) throw assignedAgentNotFound(row.assigned_agent_id ?? '', made.domainId);
      return { ...row, domain_id: made.domainId };
    },
    async claim(p, agentId, missionId, max) {
      const claims = await pgClaim(write, p, agentId, missionId, max, clock.now());
      return (
        claims?.sort((a, b) => b.task.priority - a.task.priority || (a.task.id < b.task.id ? -1 : 1)) ?? null
      );
    },
    async leased(kind, p, taskId, leaseId, arg) {
      const r = await batchers[kind].run(p, taskId, leaseId, arg);
      if (r && r.id !== null) return { done: taskOf(r) };
      return leftAlone(p, taskId, leaseId, r);
    },
    async completeAcks(p, items) {
      const rows = await acks.runMany(p, items);
      return rows.map((r, k) => {
        if (r && r.id !== null) return { done: r.updated_at };
        const i = items[k] as (typeof items)[number];
        return leftAlone(p, i.taskId, i.leaseId, r);
      });
    },
    async lockParent(tx, parentId) {
      await sql`select id from mesh_tasks where id = ${parentId} for update`.execute(tx.db);
    },
  };
}

function leftAlone(p: Principal, taskId: string, leaseId: string, cur: LeftAlone | null): FastOutcome<never> {
  switch (leftAloneVerdict(p, leaseId, cur)) {
    case 'not_found':
      return { refused: taskNotFound(taskId) };
    case 'stale_lease':
      return { refused: staleLease(taskId, leaseId, cur?.cur_state ?? null) };
    case 'general':
      return GENERAL;
  }
}
