// mgmt.sock shapes of the task worker (docs/worker.md): agent.enroll, worker.start|stop|status|
// follow and the worker.event notifications of worker.follow. `svc run` and `svc worker …` are
// thin calls of these methods.
import { RuntimeKindSchema } from './runtimes.js';
import { type Static, Type } from './type.js';

export const WorkerStartParams = Type.Object(
  {
    runtime: RuntimeKindSchema,
    domain_id: Type.String({ minLength: 1, maxLength: 100 }),
    max_concurrent: Type.Optional(Type.Integer({ minimum: 1, maximum: 256 })),
    capabilities: Type.Optional(Type.Array(Type.String({ minLength: 1, maxLength: 100 }), { maxItems: 100 })),
    poll_seconds: Type.Optional(Type.Number({ minimum: 0.1, maximum: 3600 })),
    timeout_seconds: Type.Optional(Type.Integer({ minimum: 1, maximum: 7 * 86_400 })),
    /** false: ignore task_ready and find work by polling only (diagnostics). */
    task_ready: Type.Optional(Type.Boolean()),
  },
  { additionalProperties: false },
);
export type WorkerStartParams = Static<typeof WorkerStartParams>;

export const AgentEnrollParams = Type.Object(
  {
    domain_id: Type.String({ minLength: 1, maxLength: 100 }),
    runtime: RuntimeKindSchema,
    name: Type.Optional(Type.String({ minLength: 1, maxLength: 200 })),
    capabilities: Type.Optional(Type.Array(Type.String({ minLength: 1, maxLength: 100 }), { maxItems: 100 })),
  },
  { additionalProperties: false },
);
export type AgentEnrollParams = Static<typeof AgentEnrollParams>;

/** Params of worker.stop and worker.follow: which loops (all when empty). */
export const WorkerRef = Type.Object(
  {
    runtime: Type.Optional(RuntimeKindSchema),
    domain_id: Type.Optional(Type.String()),
    /** Stop running subagents now instead of letting them finish (their tasks are re-queued
     *  by the tower when their leases expire). */
    now: Type.Optional(Type.Boolean()),
  },
  { additionalProperties: false },
);
export type WorkerRef = Static<typeof WorkerRef>;

/** What `svc run --foreground` and worker.follow stream. */
export interface WorkerEvent {
  at: string;
  loop: string;
  type: 'claimed' | 'progress' | 'completed' | 'failed' | 'cancelled' | 'abandoned' | 'stopped';
  task_id?: string;
  title?: string;
  message?: string;
}
