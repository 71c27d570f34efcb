// The mesh store on SQLite. Its one writer groups the writes that arrive while a commit is
// under way (store/tx.ts), which is its fast path: every lease-holding transition is the
// general transaction, and broadcast runs need no lock (writes never overlap).
import type { Write } from '../../store/tx.js';
import type { FastOutcome, MeshStore } from '../mesh-store.js';
import { sqliteClaim } from './claim.js';
import { sqliteInsertTask } from './create.js';

const GENERAL: FastOutcome<never> = { general: true };

export function createSqliteMeshStore(deps: { write: Write }): MeshStore {
  const { write } = deps;
  return {
    insertTask: (p, missionId, build) => sqliteInsertTask(write, p, missionId, build),
    claim: (p, agentId, missionId, max) => sqliteClaim(write, p, agentId, missionId, max),
    leased: async () => GENERAL,
    completeAcks: async (_p, items) => items.map(() => GENERAL),
    lockParent: async () => {},
  };
}
