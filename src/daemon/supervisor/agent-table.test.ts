import { describe, expect, it } from 'vitest';
import { isSvcError } from '../../protocol/errors.js';
import { type Agent, newAgent } from './agent.js';
import { AgentTable, planReload } from './agent-table.js';
import type { AgentSpec } from './agents-file.js';
import type { UnitBackend } from './backends/types.js';

const backend: UnitBackend = {
  kind: 'process',
  start: () => Promise.reject(new Error('not in this test')),
  probe: async () => new Map(),
  adopt: async () => null,
};

function agent(id: string, more: Partial<AgentSpec> = {}): Agent {
  const spec: AgentSpec = {
    id,
    runtime: 'alpha_code',
    command: null,
    cwd: null,
    env: {},
    supervise: true,
    nightlyRestart: undefined,
    pty: false,
    backend: null,
    profile: null,
    session: null,
    prompt: '',
    ...more,
  };
  return newAgent(spec, { backend, fingerprint: id, nextNightlyAt: null });
}

describe('the agent table', () => {
  const table = new AgentTable('/home/op/.svc/svcd/agents.toml');
  const web = agent('web', { profile: 'frontend' });
  const pane = agent('pane', { runtime: 'mux_hosted', session: 'main' });
  const other = agent('other', { runtime: 'beta_cli', session: 'main' });
  table.set(web);
  table.set(pane);
  table.set(other);

  it('finds an agent by id, by profile, and a mux_hosted agent by its tmux session', () => {
    expect(table.find('web')).toBe(web);
    expect(table.find('frontend')).toBe(web);
    expect(table.find('main')).toBe(pane);
    expect(table.get('frontend')).toBeUndefined();
  });

  it('answers an unknown name with agent_not_found naming agents.toml', () => {
    let err: unknown;
    try {
      table.find('ghost');
    } catch (e) {
      err = e;
    }
    expect(isSvcError(err) && [err.code, err.message]).toEqual([
      'agent_not_found',
      'no agent "ghost" in /home/op/.svc/svcd/agents.toml (by id, profile or session); see "svc agent supervise list"',
    ]);
  });

  it('tells whether a record is still the one in force after a replacement', () => {
    const t = new AgentTable('agents.toml');
    const first = agent('a');
    t.set(first);
    const second = agent('a');
    t.set(second);
    expect([t.holds(first), t.holds(second), t.size]).toEqual([false, true, 1]);
  });
});

describe('planReload', () => {
  const running = new Map([
    ['keep', 'k1'],
    ['edit', 'e1'],
    ['drop', 'd1'],
  ]);

  it.each([
    {
      name: 'sorts agents into added, removed, changed and unchanged',
      next: [
        { id: 'new', fingerprint: 'n1' },
        { id: 'edit', fingerprint: 'e2' },
        { id: 'keep', fingerprint: 'k1' },
      ],
      want: { added: ['new'], removed: ['drop'], changed: ['edit'], unchanged: ['keep'] },
    },
    {
      name: 'lists unchanged agents in file order, removed ones in table order',
      next: [
        { id: 'drop', fingerprint: 'd1' },
        { id: 'keep', fingerprint: 'k1' },
      ],
      want: { added: [], removed: ['edit'], changed: [], unchanged: ['drop', 'keep'] },
    },
    {
      name: 'removes everything for an empty file',
      next: [],
      want: { added: [], removed: ['keep', 'edit', 'drop'], changed: [], unchanged: [] },
    },
  ])('$name', ({ next, want }) => {
    expect(planReload(running, next)).toEqual(want);
  });
});
