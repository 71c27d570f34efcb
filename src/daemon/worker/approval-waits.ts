// Waiting for operators' decisions on the approvals task subagents ask for (docs/agents.md,
// Permission policy). A decision arrives as approval_decided on the control channel, and is
// also polled (GET /approvals/{id}) every pollMs and at every reconnect: a decision made while
// the channel was down, or whose notice was lost between replicas, is still learnt. No decision
// within the timeout → this node rejects the approval on the tower, with the reason.
import type { Clock, TimerHandle } from '../../lib/clock.js';
import { formatDuration } from '../../lib/duration.js';
import type { Logger } from '../../lib/log.js';
import type { Approval, ApprovalCreate } from '../../protocol/approvals.js';
import type { TowerApi } from '../tower-client/api.js';

export interface ApprovalsApi {
  create(body: ApprovalCreate): Promise<Approval>;
  get(id: string): Promise<Approval>;
  reject(id: string, reason: string): Promise<Approval>;
}

export function createTowerApprovals(tower: TowerApi): ApprovalsApi {
  const one = (id: string) => `/approvals/${encodeURIComponent(id)}`;
  return {
    create: (body) => tower.request<Approval>('POST', '/approvals', body),
    get: (id) => tower.request<Approval>('GET', one(id)),
    reject: (id, reason) => tower.request<Approval>('POST', `${one(id)}/reject`, { reason }),
  };
}

export interface ApprovalDecision {
  status: 'approved' | 'rejected';
  reason: string | null;
  /** operator: decided on the tower; timeout: nobody answered; ended: the run stopped first. */
  by: 'operator' | 'timeout' | 'ended';
}

interface Wait {
  /** A decision seen on the tower (approval_decided or a poll). */
  decided(status: 'approved' | 'rejected', reason: string | null): void;
  poll(): void;
}

export class ApprovalWaits {
  private readonly waits = new Map<string, Wait>();

  constructor(private readonly deps: { api: ApprovalsApi; clock: Clock; log: Logger; pollMs: number }) {}

  get size(): number {
    return this.waits.size;
  }

  /** approval_decided from the control channel. */
  decided(id: string, status: 'approved' | 'rejected', reason: string | null): void {
    this.waits.get(id)?.decided(status, reason);
  }

  /** The control channel (re)connected: ask about every open wait now. */
  pollAll(): void {
    for (const w of this.waits.values()) w.poll();
  }

  /** Resolves with the decision; never rejects. */
  wait(id: string, timeoutMs: number, signal: AbortSignal): Promise<ApprovalDecision> {
    const { api, clock, log } = this.deps;
    return new Promise((resolve) => {
      let done = false;
      let pollTimer: TimerHandle | null = null;
      /** This node's own rejection in flight: its echo from the tower is not an operator's. */
      let closing: { reason: string; by: ApprovalDecision['by'] } | null = null;
      const settle = (d: ApprovalDecision) => {
        if (done) return;
        done = true;
        this.waits.delete(id);
        timeout.cancel();
        pollTimer?.cancel();
        signal.removeEventListener('abort', onAbort);
        resolve(d);
      };
      const decided = (status: 'approved' | 'rejected', reason: string | null) => {
        const ours = closing !== null && status === 'rejected' && reason === closing.reason;
        settle({ status, reason, by: ours && closing ? closing.by : 'operator' });
      };
      const poll = () => {
        if (done) return;
        api.get(id).then(
          (a) => {
            if (a.status !== 'pending') decided(a.status, a.reason);
          },
          (e: unknown) => log.debug({ err: e, approval: id }, 'cannot read the approval; polling again'),
        );
      };
      const schedulePoll = () => {
        pollTimer = clock.setTimeout(() => {
          if (done) return;
          poll();
          schedulePoll();
        }, this.deps.pollMs);
      };
      /** Rejects on the tower; a decision that won the race there is the one that counts. */
      const close = (reason: string, by: ApprovalDecision['by']) => {
        if (done) return;
        closing = { reason, by };
        api.reject(id, reason).then(
          () => settle({ status: 'rejected', reason, by }),
          async (e: unknown) => {
            const a = await api.get(id).catch(() => null);
            if (a && a.status !== 'pending') decided(a.status, a.reason);
            else {
              log.warn({ err: e, approval: id }, 'cannot reject the approval on the tower');
              settle({ status: 'rejected', reason, by });
            }
          },
        );
      };
      const timeout = clock.setTimeout(
        () => close(`no answer within ${formatDuration(timeoutMs)}`, 'timeout'),
        timeoutMs,
      );
      const onAbort = () => {
        // The run stopped (cancelled, timed out, svcd stopping): the question is moot. Said on
        // the tower so it does not stay pending; the run does not wait for that.
        void api.reject(id, 'the run ended before a decision').catch(() => {});
        settle({ status: 'rejected', reason: 'the run ended before a decision', by: 'ended' });
      };
      this.waits.set(id, { decided, poll });
      if (signal.aborted) return onAbort();
      signal.addEventListener('abort', onAbort, { once: true });
      schedulePoll();
    });
  }
}
