// Completing leased tasks: claimed or running → completed with the worker's result, one
// task (answered with the task) or several at once (answered with an acknowledgement each:
// the worker holds the tasks already), each on its own lease with its own outcome.
import { SvcError } from '../../protocol/errors.js';
import type { MeshTask } from '../../protocol/mesh.js';
import type { Principal } from '../auth/principal.js';
import { leasedTransition, leasedWrite } from './leased.js';
import type { MeshDeps } from './mesh-store.js';
import { LEASED } from './states.js';

/** One item of completeTasks: an acknowledgement, or why not. */
export type CompleteOutcome =
  | { task_id: string; ok: true; updated_at: string }
  | { task_id: string; ok: false; code: string; detail: string };

export interface CompleteItem {
  task_id: string;
  lease_id: string;
  result?: unknown;
}

export function completeTask(
  deps: Pick<MeshDeps, 'write' | 'store'>,
  p: Principal,
  taskId: string,
  leaseId: string,
  result: unknown,
): Promise<MeshTask> {
  const json = result === undefined ? null : JSON.stringify(result);
  return leasedTransition(deps, 'complete', p, taskId, leaseId, json, () =>
    completeInTx(deps, p, taskId, leaseId, json),
  );
}

/** The general path of a completion. */
function completeInTx(
  deps: Pick<MeshDeps, 'write' | 'store'>,
  p: Principal,
  taskId: string,
  leaseId: string,
  json: string | null,
): Promise<MeshTask> {
  return leasedWrite(deps, p, taskId, leaseId, {
    from: LEASED,
    change: () => ({ state: 'completed', result: json, lease_id: null, lease_expires_at: null }),
    action: 'completed',
  });
}

/**
 * Completes several tasks, each on its own lease and with its own outcome (one stale lease
 * does not stop the others). Only the items the store's one-statement path left to the
 * general transaction go one by one.
 */
export async function completeTasks(
  deps: Pick<MeshDeps, 'write' | 'store'>,
  p: Principal,
  items: readonly CompleteItem[],
): Promise<CompleteOutcome[]> {
  const args = items.map((i) => (i.result === undefined ? null : JSON.stringify(i.result)));
  const fast = await deps.store.completeAcks(
    p,
    items.map((i, k) => ({ taskId: i.task_id, leaseId: i.lease_id, arg: args[k] ?? null })),
  );
  const out = fast.map((r, k): CompleteOutcome | Promise<CompleteOutcome> => {
    const i = items[k] as CompleteItem;
    if ('done' in r) return { task_id: i.task_id, ok: true, updated_at: r.done };
    if ('refused' in r) return refused(i, r.refused);
    return completeInTx(deps, p, i.task_id, i.lease_id, args[k] ?? null).then(
      (t): CompleteOutcome => ({ task_id: i.task_id, ok: true, updated_at: t.updated_at }),
      (e: unknown) => {
        if (!(e instanceof SvcError)) throw e;
        return refused(i, e);
      },
    );
  });
  return out.some((o) => o instanceof Promise) ? Promise.all(out) : (out as CompleteOutcome[]);
}

function refused(i: CompleteItem, e: SvcError): CompleteOutcome {
  return { task_id: i.task_id, ok: false, code: e.code, detail: e.message };
}
