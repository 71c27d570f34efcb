// A control channel that never connects, for daemon contexts in tests: components can
// subscribe, and a test can deliver tower messages itself.

import type { ControlChannel } from '../../src/daemon/tower-client/control.js';
import type { TowerToNode } from '../../src/protocol/control.js';

export interface FakeControl extends ControlChannel {
  deliver(msg: TowerToNode): void;
  sent: unknown[];
  /** Every setAgentStatus call, in order. */
  presence: { agent_id: string; status: string | null }[];
}

export function fakeControl(): FakeControl {
  const listeners = new Map<string, Set<(m: never) => void>>();
  const sent: unknown[] = [];
  const presence: FakeControl['presence'] = [];
  return {
    name: 'control',
    attachSecret: 'f'.repeat(64),
    connected: false,
    sent,
    presence,
    setAgentStatus(agent_id, status) {
      presence.push({ agent_id, status });
    },
    on(type, fn) {
      let set = listeners.get(type);
      if (!set) {
        set = new Set();
        listeners.set(type, set);
      }
      set.add(fn as (m: never) => void);
      return () => set.delete(fn as (m: never) => void);
    },
    send(msg) {
      sent.push(msg);
      return false;
    },
    waitConnected: () => Promise.resolve(),
    async start() {},
    async stop() {},
    status: () => ({ connected: false }),
    deliver(msg) {
      for (const fn of listeners.get(msg.type) ?? []) (fn as (m: TowerToNode) => void)(msg);
    },
  };
}
