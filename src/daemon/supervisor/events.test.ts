import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { waitFor } from '../../../test/support/poll.js';
import { FakeClock } from '../../lib/clock.js';
import type { NewEvent } from '../../protocol/events.js';
import type { AgentTerminal } from '../process/terminal.js';
import type { EventOutbox } from '../tower-client/outbox.js';
import { newAgent } from './agent.js';
import type { UnitBackend } from './backends/types.js';
import { createSupervisorEvents } from './events.js';

const T0 = Date.parse('2025-06-10T10:00:00Z');

const backend: UnitBackend = {
  kind: 'tmux',
  start: () => Promise.reject(new Error('not in this test')),
  probe: async () => new Map(),
  adopt: async () => null,
};

const pane = newAgent(
  {
    id: 'pane',
    runtime: 'mux_hosted',
    command: null,
    cwd: null,
    env: {},
    supervise: true,
    nightlyRestart: undefined,
    pty: false,
    backend: null,
    profile: null,
    session: 'main',
    prompt: '',
  },
  { backend, fingerprint: 'f', nextNightlyAt: null },
  { paused: false, restarts: 2 },
);

function setup(outbox: EventOutbox) {
  const logged: { msg: string; agent?: string }[] = [];
  const log = pino({ level: 'info' }, { write: (line: string) => logged.push(JSON.parse(line)) });
  const events = createSupervisorEvents({ outbox, nodeId: 'node_1', clock: new FakeClock(T0), log });
  return { events, logged };
}

describe('supervisor events', () => {
  it('publishes a matrix event with the node, the unit, the restart count and the time', async () => {
    const published: NewEvent[] = [];
    const { events } = setup({ publish: async (e) => void published.push(e) });
    await events.matrix(pane, 'agent.gave_up', 'dead again after restart', { retry_at: 'later' });
    expect(published).toEqual([
      {
        type: 'matrix',
        agent_id: 'pane',
        status: null,
        payload: {
          event: 'agent.gave_up',
          node_id: 'node_1',
          agent_id: 'pane',
          runtime: 'mux_hosted',
          backend: 'tmux',
          unit: 'main',
          reason: 'dead again after restart',
          restarts: 2,
          at: '2025-06-10T10:00:00.000Z',
          retry_at: 'later',
        },
      },
    ]);
  });

  it('logs an outbox failure instead of failing the operation that published', async () => {
    const { events, logged } = setup({ publish: () => Promise.reject(new Error('disk full')) });
    await events.matrix(pane, 'agent.restarted', 'dead');
    events.progress(pane, { kind: 'message', text: 'hi' }, 'run_1');
    await waitFor('the progress failure to be logged', () => logged.length === 2);
    expect(logged.map((l) => [l.msg, l.agent])).toEqual([
      ['cannot record event', 'pane'],
      ['cannot record progress', 'pane'],
    ]);
  });

  it('tells every terminal listener, even after one throws, until it unsubscribes', () => {
    const { events, logged } = setup({ publish: async () => {} });
    const heard: [string, boolean][] = [];
    events.onTerminal(() => {
      throw new Error('listener bug');
    });
    const off = events.onTerminal((id, t) => heard.push([id, t !== null]));
    events.terminal(pane, {} as AgentTerminal);
    off();
    events.terminal(pane, null);
    expect(heard).toEqual([['pane', true]]);
    expect(logged.map((l) => l.msg)).toEqual(['terminal listener failed', 'terminal listener failed']);
  });
});
