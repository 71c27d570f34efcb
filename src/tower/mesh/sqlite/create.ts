// SQLite: a new task as one write of the store's single writer (the checks, the row, its
// mission entry, its event), grouped with the writes that arrive meanwhile.
import type { Principal } from '../../auth/principal.js';
import type { Write } from '../../store/tx.js';
import { checkAssignedAgent, insertTaskRow, missionDomain } from '../insert-task.js';
import type { NewTaskRow } from '../mesh-store.js';
import type { MeshTaskRow } from '../migrations.js';
import { missionNotFound } from '../task.js';

export function sqliteInsertTask(
  write: Write,
  p: Principal,
  missionId: string,
  build: (nowMs: number, now: string) => NewTaskRow,
): Promise<MeshTaskRow> {
  return write(async (tx) => {
    const domainId = await missionDomain(tx, p, missionId);
    if (domainId === null) throw missionNotFound(missionId);
    const row: MeshTaskRow = { ...build(tx.nowMs, tx.now), domain_id: domainId };
    await checkAssignedAgent(tx, row.assigned_agent_id, domainId);
    await insertTaskRow(tx, row);
    return row;
  });
}
