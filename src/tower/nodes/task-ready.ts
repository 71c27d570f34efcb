// Which nodes to tell that a task became claimable: those with an enrolled agent that could
// claim it (same domain; the assigned agent only, for assigned tasks; the required
// capabilities).
import type { MeshTask } from '../../protocol/mesh.js';
import type { Db } from '../store/types.js';

export async function nodesForTask(db: Db, task: MeshTask): Promise<string[]> {
  let q = db.selectFrom('agents').select(['node_id', 'capabilities']).where('domain_id', '=', task.domain_id);
  if (task.assigned_agent_id) q = q.where('id', '=', task.assigned_agent_id);
  const need = task.required_capabilities;
  const nodes = new Set<string>();
  for (const a of await q.execute()) {
    const have = new Set(JSON.parse(a.capabilities) as string[]);
    if (need.every((c) => have.has(c))) nodes.add(a.node_id);
  }
  return [...nodes];
}
