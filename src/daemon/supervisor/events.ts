// What the supervisor tells others: matrix and progress feed events (through the outbox) and,
// in process, terminal listeners (the attach gateway). A failing publish or listener is
// logged, never thrown into the operation that caused it.
import type { Clock } from '../../lib/clock.js';
import { iso } from '../../lib/clock.js';
import type { Logger } from '../../lib/log.js';
import type { AgentTerminal } from '../process/terminal.js';
import type { ProgressUpdate } from '../runtimes/progress.js';
import type { EventOutbox } from '../tower-client/outbox.js';
import type { Agent } from './agent.js';

export type TerminalListener = (agentId: string, terminal: AgentTerminal | null) => void;

export interface SupervisorEvents {
  /** A matrix event about the agent (agent.restarted, agent.nightly_restart, agent.gave_up). */
  matrix(a: Agent, event: string, reason: string, extra?: Record<string, unknown>): Promise<void>;
  /** A progress update of the agent's session (runId null) or of one of its runs. */
  progress(a: Agent, u: ProgressUpdate, runId: string | null): void;
  /** The agent's terminal appeared (start, restart) or went (null). */
  terminal(a: Agent, t: AgentTerminal | null): void;
  onTerminal(listener: TerminalListener): () => void;
}

export function createSupervisorEvents(deps: {
  outbox: EventOutbox;
  nodeId: string;
  clock: Clock;
  log: Logger;
}): SupervisorEvents {
  const { outbox, nodeId, clock, log } = deps;
  const terminalListeners = new Set<TerminalListener>();
  return {
    async matrix(a, event, reason, extra = {}) {
      try {
        await outbox.publish({
          type: 'matrix',
          agent_id: a.spec.id,
          status: null,
          payload: {
            event,
            node_id: nodeId,
            agent_id: a.spec.id,
            runtime: a.spec.runtime,
            backend: a.backend.kind,
            unit: a.unitName,
            reason,
            restarts: a.restarts,
            at: iso(clock.now()),
            ...extra,
          },
        });
      } catch (e) {
        log.error({ err: e, agent: a.spec.id, event }, 'cannot record event');
      }
    },

    progress(a, u, runId) {
      outbox
        .publish({
          type: 'progress',
          agent_id: a.spec.id,
          status: null,
          payload: {
            node_id: nodeId,
            agent_id: a.spec.id,
            runtime: a.spec.runtime,
            session_id: a.unit?.acp?.sessionId ?? null,
            run_id: runId,
            kind: u.kind,
            ...(u.text !== undefined ? { text: u.text } : {}),
            ...(u.data ? { data: u.data } : {}),
          },
        })
        .catch((e: unknown) => log.error({ err: e, agent: a.spec.id }, 'cannot record progress'));
    },

    terminal(a, t) {
      for (const l of terminalListeners) {
        try {
          l(a.spec.id, t);
        } catch (e) {
          log.error({ err: e }, 'terminal listener failed');
        }
      }
    },

    onTerminal(listener) {
      terminalListeners.add(listener);
      return () => terminalListeners.delete(listener);
    },
  };
}
