// mgmt.sock methods of the task worker, as a table daemon.ts registers: agent.enroll and
// worker.start|stop|status|follow (docs/worker.md). Params are checked against their schemas
// (src/protocol/worker.ts) before the worker sees them.
import { AgentEnrollParams, WorkerRef, WorkerStartParams } from '../../protocol/worker.js';
import { type MgmtMethod, method } from '../mgmt/method.js';
import type { Worker } from './worker.js';

export function workerMethods(w: Worker): MgmtMethod[] {
  return [
    method('agent.enroll', async (params) => w.enroll(params as AgentEnrollParams), AgentEnrollParams),
    method('worker.start', async (params) => w.startLoop(params as WorkerStartParams), WorkerStartParams),
    method('worker.stop', async (params) => w.stopLoops((params ?? {}) as WorkerRef), WorkerRef),
    method('worker.status', async () => w.loops()),
    method('worker.follow', async (params, call) => w.follow((params ?? {}) as WorkerRef, call), WorkerRef),
  ];
}
